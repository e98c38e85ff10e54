//! The Redis ceiling, measured in the same run: redis-benchmark with EVALSHA of the
//! project's own acquire and release scripts (the library's copies of lua/).

use std::process::Command;

use serde_json::json;

use super::server::host_port;
use super::{Ctx, Report};

/// Runs redis-benchmark; returns (requests/s, p50 µs) from its CSV line.
fn redis_benchmark(host: &str, port: u16, args: &[&str]) -> Result<(f64, f64), String> {
    let out = Command::new("redis-benchmark")
        .args(["-h", host, "-p", &port.to_string(), "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("redis-benchmark: {e} (install redis-tools)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("\"EVALSHA"))
        .ok_or_else(|| format!("redis-benchmark printed no result: {text}"))?;
    let cols: Vec<f64> = line
        .split("\",\"")
        .skip(1)
        .map(|c| c.trim_matches('"').parse().unwrap_or(0.0))
        .collect();
    match cols.as_slice() {
        [rps, _avg, _min, p50, ..] => Ok((*rps, p50 * 1000.0)),
        _ => Err(format!("unexpected redis-benchmark line: {line}")),
    }
}

fn load(url: &str, src: &str) -> Result<String, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut conn = client.get_connection().map_err(|e| e.to_string())?;
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(src)
        .query(&mut conn)
        .map_err(|e| e.to_string())
}

/// Single-client EVALSHA p50 and the 50-client throughput of acquire and release,
/// unpipelined and with `-P 16`, on the first master.
pub fn run(ctx: &Ctx) -> Result<Report, String> {
    let url = &ctx.urls[0];
    let (host, port) = host_port(url).ok_or("the ceiling needs a redis://host:port master")?;
    let (acquire_src, release_src) = (super::ACQUIRE_LUA, super::RELEASE_LUA);
    let acquire = load(url, acquire_src)?;
    let release = load(url, release_src)?;
    let key = ctx.key("ceil:__rand_int__");
    let single = ctx.key("ceil:single");
    let channel = ctx.key("ceil:channel");
    let acq_args = |key: &str| -> Vec<String> {
        ["EVALSHA", &acquire, "1", key, "10000", "bench-holder:1"]
            .map(String::from)
            .to_vec()
    };
    let rel_args = || -> Vec<String> {
        [
            "EVALSHA",
            &release,
            "2",
            &key,
            &redlatch::wire::waiter_registry(&key),
            &channel,
            "0",
            "10000",
            "bench-holder:1",
        ]
        .map(String::from)
        .to_vec()
    };
    let bench = |extra: &[&str], cmd: Vec<String>| {
        let mut args: Vec<&str> = extra.to_vec();
        args.extend(cmd.iter().map(String::as_str));
        redis_benchmark(&host, port, &args)
    };
    let (_, single_p50) = bench(&["-c", "1", "-n", "20000"], acq_args(&single))?;
    let mut figures = json!({
        "lib": "redis-benchmark",
        "workload": "ceiling",
        "masters": 1,
        "evalsha_single_client_p50_us": single_p50,
    });
    for pipeline in ["1", "16"] {
        let n = if pipeline == "1" { "200000" } else { "1000000" };
        let common = ["-c", "50", "-n", n, "-r", "100000", "-P", pipeline];
        let (acq, _) = bench(&common, acq_args(&key))?;
        let (rel, _) = bench(&common, rel_args())?;
        figures[format!("acquire_ops_per_s_p{pipeline}")] = json!(acq);
        figures[format!("release_ops_per_s_p{pipeline}")] = json!(rel);
        figures[format!("pairs_per_s_p{pipeline}")] = json!(1.0 / (1.0 / acq + 1.0 / rel));
    }
    Ok(figures.as_object().expect("object").clone())
}
