use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn p50(mut v: Vec<u128>) -> u128 {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let url = std::env::args().nth(1).unwrap();
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(redlatch::script_sources()[0].1)
            .query_async(&mut c)
            .await
            .unwrap();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha).arg(1).arg("probe").arg(10000).arg("h:1");
        let mut v = Vec::new();
        for i in 0..6000 {
            let t = Instant::now();
            let _: redis::Value = cmd.query_async(&mut c).await.unwrap();
            if i >= 1000 {
                v.push(t.elapsed().as_micros());
            }
        }
        println!("multiplexed p50 {}us", p50(v));
        // raw
        let addr = url.trim_start_matches("redis://");
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        let bytes = cmd.get_packed_command();
        let mut buf = vec![0u8; 4096];
        let mut v = Vec::new();
        for i in 0..6000 {
            let t = Instant::now();
            s.write_all(&bytes).await.unwrap();
            let _ = s.read(&mut buf).await.unwrap();
            if i >= 1000 {
                v.push(t.elapsed().as_micros());
            }
        }
        println!("raw tokio p50 {}us", p50(v));
    });
    // blocking std
    let url = std::env::args().nth(1).unwrap();
    let addr = url.trim_start_matches("redis://");
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_connection().unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(redlatch::script_sources()[0].1)
        .query(&mut c)
        .unwrap();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(&sha).arg(1).arg("probe").arg(10000).arg("h:1");
    let bytes = cmd.get_packed_command();
    let mut buf = vec![0u8; 4096];
    let mut v = Vec::new();
    for i in 0..6000 {
        let t = Instant::now();
        s.write_all(&bytes).unwrap();
        let _ = s.read(&mut buf).unwrap();
        if i >= 1000 {
            v.push(t.elapsed().as_micros());
        }
    }
    println!("raw blocking p50 {}us", p50(v));
}
