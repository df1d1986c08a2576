//! moto's EC2 server on loopback, as `.ci/run` starts it: its address, or a
//! skip said plainly (a failure when `GPUROOM_REQUIRE_MOTO` is set), and
//! moto's dummy credentials for the SDK's default chain.

#![allow(dead_code)]

pub fn moto() -> Option<String> {
    let url = std::env::var("GPUROOM_MOTO_URL").ok();
    if url.is_none() {
        assert!(std::env::var_os("GPUROOM_REQUIRE_MOTO").is_none(), "moto is required (GPUROOM_REQUIRE_MOTO is set) but GPUROOM_MOTO_URL is not");
        eprintln!("SKIPPED: no moto server; set GPUROOM_MOTO_URL (see .ci/run) to run the EC2 round trips");
    }
    url
}

/// moto accepts any credentials; the SDK's default chain finds these.
#[allow(unsafe_code)]
pub fn credentials() {
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        // SAFETY: set before any thread of the test reads the environment.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
    }
}
