//! Advisory elastic capacity end to end: `gpuroom --live` in a real
//! terminal (tmux) on moto's EC2. A job that no machine fits waits; the
//! fleet pane shows what the room would buy for it; the operator approves
//! it with `a`, reads the confirmation, says yes; the instance is launched
//! on (moto's) EC2 with our tags, shows as booting, then ready; the log's
//! audit table holds the approval under the operator's name.
//!
//! Needs tmux and moto: skipped, saying so, unless `GPUROOM_REQUIRE_TMUX` /
//! `GPUROOM_REQUIRE_MOTO` are set (as `.ci/run` does).

#[path = "support/moto.rs"]
mod moto;
#[path = "support/tmux.rs"]
mod tmux;

use std::time::Duration;

use gpuroom::sources::aws::{self, AwsConfig};
use gpuroom::store::Store;
use moto::{credentials, moto};
use tmux::{Tmux, tmux_available};

const WAIT: Duration = Duration::from_secs(30);

fn alive(state: &str) -> bool {
    matches!(state, "pending" | "running")
}

const JOBS: &str = r#"
[[tenant]]
id = "nlp"
quota_gpus = 8
monthly_budget = "50000"

[[job]]
name = "e2e-finetune"
tenant = "nlp"
gpus = 4
gpu_mem_mib = 12000
steps = 1000
pool = "no-spot"
command = ["true"]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_approves_a_proposed_launch_and_finds_it_audited() {
    if !tmux_available() {
        return;
    }
    let Some(url) = moto() else { return };
    credentials();
    let cfg = AwsConfig { endpoint_url: Some(url.clone()), ..AwsConfig::default() };
    let client = aws::client(&cfg).await;
    let images = client.describe_images().send().await.expect("moto answers DescribeImages");
    let image = images.images().iter().find_map(|i| i.image_id()).expect("moto ships images").to_string();
    let zone = "us-east-1f";
    // The fleet poll would make any running GPU instance a node that takes
    // the job: none may run in moto when the console starts (an earlier
    // run's leftovers go).
    for i in aws::describe_fleet(&client, None).await.expect("the fleet") {
        if alive(&i.state) {
            aws::terminate(&client, &i.id).await.expect("clean up");
        }
    }
    let ours_before = 0;

    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("config.toml");
    let text = format!(
        "[sources.nvml]\nenabled = false\n\
         [sources.aws]\nregion = \"us-east-1\"\nendpoint_url = {url:?}\nimage_id = {image:?}\nfleet_every_secs = 1\nprices_every_secs = 3600\n\
         [[sources.aws.pools]]\ninstance_type = \"p3.8xlarge\"\nzone = {zone:?}\nbilling = \"on-demand\"\nmax_nodes = 2\n\
         [capacity]\nplan_every = 2\n"
    );
    std::fs::write(&config, text).expect("write the config");
    let jobs = dir.path().join("jobs.toml");
    std::fs::write(&jobs, JOBS).expect("write the jobs");
    let db = dir.path().join("live.db");
    let bin = env!("CARGO_BIN_EXE_gpuroom");
    let command = format!(
        "USER=e2e-olga SUDO_USER= SSH_CONNECTION= {bin} --live --config {} --jobs {} --db {}; echo \"gpuroom exited with $?\"; sleep 60",
        config.display(),
        jobs.display(),
        db.display()
    );
    let tmux = Tmux::start("ec2", 200, 60, &command);
    tmux.keys(&["1"]);
    let screen = tmux.wait_for("the proposal in the fleet pane", WAIT, |s| s.contains("would launch 1 × OD p3.8xlarge"));
    assert!(screen.contains("for j1"), "it says for which job:\n{screen}");
    assert!(screen.contains("capacity ADVISORY"), "the mode is shown:\n{screen}");
    assert_eq!(
        aws::describe_fleet(&client, Some(aws::OWNER_TAG)).await.expect("the fleet").iter().filter(|i| i.zone == zone && alive(&i.state)).count(),
        ours_before,
        "advisory: nothing launched before the approval"
    );

    tmux.keys(&["a"]);
    let dialog = tmux.wait_for("the confirmation", WAIT, |s| s.contains("Approve capacity proposal #"));
    assert!(dialog.contains("billed from their launch"), "the cost is named:\n{dialog}");
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("the launch", WAIT, |s| s.contains("↑ launching 1 × OD p3.8xlarge") || s.contains("1/1 nodes up"));
    assert!(!screen.contains("? #1 would"), "the proposal is gone once carried out:\n{screen}");
    // EC2 answers, the fleet poll sees it running: a node of the room's.
    let screen = tmux.wait_for("the node up", WAIT, |s| s.contains("1/1 nodes up"));
    assert!(screen.contains("p3.8xlarge"), "{screen}");

    // On EC2: one more instance of ours in that zone, on demand.
    let mut launched = Vec::new();
    for _ in 0..100 {
        launched =
            aws::describe_fleet(&client, Some(aws::OWNER_TAG)).await.expect("the fleet").into_iter().filter(|i| i.zone == zone && alive(&i.state)).collect();
        if launched.len() > ours_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(launched.len(), ours_before + 1, "{launched:?}");
    let instance = launched.iter().max_by_key(|i| i.launched).expect("ours");
    assert!(!instance.spot && instance.instance_type == "p3.8xlarge", "{instance:?}");

    tmux.quit_owning_console();
    tmux.wait_for("the exit", WAIT, |s| s.contains("gpuroom exited with 0"));
    let store = Store::open_read_only(&db).expect("the live log");
    let audit = store.audit_records().expect("the audit table");
    let approved: Vec<_> = audit.iter().filter(|r| r.user == "e2e-olga" && r.verb == "approve a capacity change").collect();
    assert_eq!(approved.len(), 1, "{audit:#?}");
    assert_eq!(approved[0].outcome, "done", "{audit:#?}");
    assert!(approved[0].detail.contains("launch 1 × OD p3.8xlarge"), "what was approved is named: {audit:#?}");
    for i in &launched {
        let _ = aws::terminate(&client, &i.id).await;
    }
}
