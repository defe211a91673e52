//! Lambda entry point of `process`: the built-in runners (`RUNNER=simulated
//! | http | lambda`), served by [`process::serve_with`].

use process::runner::AnyRunner;

// One thread: Lambda runs one event at a time per sandbox with at most one
// vCPU below 1,769 MB, so worker threads only add wake-ups (measured: 10 %
// less CPU per task in `lifo bench --only process`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    process::serve_with(AnyRunner::from_source).await
}
