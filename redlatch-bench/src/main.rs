//! `redlatch-bench`: the workloads of BENCHMARKS.md (W1–W7, R1, S1, RW, the bare-script
//! floor and ceiling, cluster grouping) against the masters given. Not published: it
//! is the project's measuring instrument, kept out of the user's `redlatch` binary.

#![deny(unsafe_code)]

mod bench;

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "redlatch-bench",
    version,
    about = "redlatch's benchmark workloads (BENCHMARKS.md) against the masters given"
)]
struct Cli {
    #[command(flatten)]
    args: bench::BenchArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let failure = redlatch_cli::exit::Failure::new(
                redlatch_cli::exit::INTERNAL,
                format!("no runtime: {e}"),
            );
            return failure.report();
        }
    };
    runtime.block_on(bench::run(cli.args))
}
