//! `redlatch bench`: load workloads against real masters. A stub for now: the flags
//! are fixed, the workloads come later.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::conn::RedisArgs;
use crate::duration;

/// Which workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    #[value(name = "W1", alias = "w1")]
    W1,
    #[value(name = "W2", alias = "w2")]
    W2,
    #[value(name = "W3", alias = "w3")]
    W3,
    #[value(name = "W4", alias = "w4")]
    W4,
    #[value(name = "W5", alias = "w5")]
    W5,
    #[value(name = "W6", alias = "w6")]
    W6,
    /// Every workload in turn.
    #[value(name = "all")]
    All,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workload to run.
    #[arg(long, value_enum, default_value = "all")]
    pub workload: Workload,

    /// How long each workload runs.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = duration::parse)]
    pub duration: Duration,

    /// Print results as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn run(args: BenchArgs) -> ExitCode {
    let _ = args;
    eprintln!("redlatch: bench: not implemented yet");
    ExitCode::from(2)
}
