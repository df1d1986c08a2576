//! The real data the embedded simulator replays, compiled into the binary so
//! that `gpuroom` shows a live cluster on any machine, from any directory.
//! Sources and licences: fixtures/README.md.

/// AWS DescribeSpotPriceHistory dumps (name, JSON text): us-west-2 for the
/// simulated cluster, us-east-1 p3.2xlarge for the spot experiment.
pub const PRICE_DUMPS: &[(&str, &str)] = &[
    ("spot-prices/aws/us-east-1/2020-02-27.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-east-1/2020-02-27.p3.2xlarge.json")),
    ("spot-prices/aws/us-east-1/2020-03-05.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-east-1/2020-03-05.p3.2xlarge.json")),
    ("spot-prices/aws/us-east-1/2020-03-13.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-east-1/2020-03-13.p3.2xlarge.json")),
    ("spot-prices/aws/us-east-1/2020-03-23.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-east-1/2020-03-23.p3.2xlarge.json")),
    ("spot-prices/aws/us-east-1/p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-east-1/p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p2.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p2.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p2.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p2.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p2.xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p2.xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p3.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p3.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-02-27.p3.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-02-27.p3.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p2.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p2.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p2.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p2.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p2.xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p2.xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p3.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p3.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-05.p3.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-05.p3.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p2.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p2.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p2.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p2.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p2.xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p2.xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p3.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p3.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-13.p3.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-13.p3.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p2.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p2.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p2.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p2.8xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p2.xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p2.xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p3.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p3.16xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/2020-03-23.p3.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/2020-03-23.p3.8xlarge.json")),
    ("spot-prices/aws/us-west-2/p2.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p2.16xlarge.json")),
    ("spot-prices/aws/us-west-2/p2.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p2.8xlarge.json")),
    ("spot-prices/aws/us-west-2/p2.xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p2.xlarge.json")),
    ("spot-prices/aws/us-west-2/p3.16xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p3.16xlarge.json")),
    ("spot-prices/aws/us-west-2/p3.2xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p3.2xlarge.json")),
    ("spot-prices/aws/us-west-2/p3.8xlarge.json", include_str!("../../fixtures/spot-prices/aws/us-west-2/p3.8xlarge.json")),
];

/// Spot preemption traces (name, JSON text); the zone is the file name's prefix.
pub const PREEMPTION_TRACES: &[(&str, &str)] = &[
    (
        "spot-traces/preemption/aws-04-22-2023/us-east-1c_v100_1.json",
        include_str!("../../fixtures/spot-traces/preemption/aws-04-22-2023/us-east-1c_v100_1.json"),
    ),
    (
        "spot-traces/preemption/aws-04-22-2023/us-east-1f_v100_1.json",
        include_str!("../../fixtures/spot-traces/preemption/aws-04-22-2023/us-east-1f_v100_1.json"),
    ),
    (
        "spot-traces/preemption/aws-04-22-2023/us-west-2b_v100_1.json",
        include_str!("../../fixtures/spot-traces/preemption/aws-04-22-2023/us-west-2b_v100_1.json"),
    ),
    (
        "spot-traces/preemption/aws-04-22-2023/us-west-2c_v100_1.json",
        include_str!("../../fixtures/spot-traces/preemption/aws-04-22-2023/us-west-2c_v100_1.json"),
    ),
];

/// Spot availability traces (name, JSON text): whether a V100 spot instance
/// could be launched, every 195 s for 45 days; the zone is the file name's prefix.
pub const AVAILABILITY_TRACES: &[(&str, &str)] = &[
    (
        "spot-traces/availability/aws-02-15-2023/us-east-1c_v100_1.json",
        include_str!("../../fixtures/spot-traces/availability/aws-02-15-2023/us-east-1c_v100_1.json"),
    ),
    (
        "spot-traces/availability/aws-02-15-2023/us-east-1f_v100_1.json",
        include_str!("../../fixtures/spot-traces/availability/aws-02-15-2023/us-east-1f_v100_1.json"),
    ),
    (
        "spot-traces/availability/aws-02-15-2023/us-west-2a_v100_1.json",
        include_str!("../../fixtures/spot-traces/availability/aws-02-15-2023/us-west-2a_v100_1.json"),
    ),
    (
        "spot-traces/availability/aws-02-15-2023/us-west-2b_v100_1.json",
        include_str!("../../fixtures/spot-traces/availability/aws-02-15-2023/us-west-2b_v100_1.json"),
    ),
    (
        "spot-traces/availability/aws-02-15-2023/us-west-2c_v100_1.json",
        include_str!("../../fixtures/spot-traces/availability/aws-02-15-2023/us-west-2c_v100_1.json"),
    ),
];

pub const PHILLY_JOBS: (&str, &str) = ("jobs/philly-pollux.csv", include_str!("../../fixtures/jobs/philly-pollux.csv"));

pub const DEFAULT_CONFIG: (&str, &str) = ("fixtures/sim/default.toml", include_str!("../../fixtures/sim/default.toml"));

/// The fixed fleet the elastic default replaces, for comparison (`--sim-config static`).
pub const STATIC_CONFIG: (&str, &str) = ("fixtures/sim/static.toml", include_str!("../../fixtures/sim/static.toml"));
