//! The S3 fence (redlatch::fence::s3, feature `s3`) against a real S3-compatible server
//! the harness starts (redlatch_testkit::moto: moto's server mode, authentication on)
//! and real fenced locks on a redis-server: the conditional PUT, the token in the
//! object's metadata, and every refusal typed with nothing of the refused write stored.
//! Kleppmann's three cases on S3 are in fence_kleppmann.rs and topologies' fence_clock.rs.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::moto::{MotoServer, BUCKET, REGION};
use common::RedisServer;
use redlatch::fence::s3::{S3Fence, TOKEN_HEADER};
use redlatch::fence::{HasToken, Token};
use redlatch::{Client, Config, Error, StoreProblem};

/// Slack over a time bound for a loaded machine (the HTTP exchange, moto's Python).
const SLACK: Duration = Duration::from_secs(3);

/// The object's body and token, as the store has them.
async fn read(fence: &S3Fence, key: &str) -> (String, Option<u64>) {
    let object = fence.get(key).await.unwrap().expect("the object exists");
    let body = String::from_utf8(object.body).unwrap();
    (body, object.token.map(|t| t.value()))
}

/// The store's problem, or a panic naming what came instead.
fn problem(result: Result<impl std::fmt::Debug, Error>) -> StoreProblem {
    match result {
        Err(Error::FenceStore {
            store: "s3",
            problem,
            ..
        }) => problem,
        other => panic!("expected Error::FenceStore from s3, got {other:?}"),
    }
}

#[tokio::test]
async fn the_newest_or_an_equal_token_writes_and_an_older_one_is_refused_typed() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::newest") else {
        return;
    };
    let server = RedisServer::start();
    let fence = moto.fence();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let lock = client.fenced_lock("report");
    let first = lock.lock().await.unwrap();
    lock.force_unlock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let (t1, t2) = (
        first.fencing_token().unwrap(),
        second.fencing_token().unwrap(),
    );
    assert!(t1 < t2);
    assert_eq!(fence.get("r.csv").await.unwrap(), None, "no object yet");

    let w = fence.put("r.csv", "one", &first).await.unwrap();
    assert_eq!(w.token, t1);
    // The same hold writing again: an equal token of the same holder passes.
    fence.put("r.csv", "one again", &first).await.unwrap();
    let w2 = fence.put("r.csv", "two", &second).await.unwrap();
    assert_ne!(w.etag, w2.etag);
    match fence.put("r.csv", "stale", &first).await {
        Err(e @ Error::Fenced { .. }) => {
            assert!(e.is_fenced() && e.is_permanent());
            let Error::Fenced {
                resource,
                lock,
                presented,
                newest,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(
                (resource.as_str(), lock.as_str(), presented, newest),
                ("r.csv", "report", t1, t2)
            );
        }
        other => panic!("expected Error::Fenced, got {other:?}"),
    }
    // The same token from another holder: a token handed out twice, refused.
    let twin = Token::new("report", t2).with_holder("someone-else");
    assert!(
        matches!(fence.put("r.csv", "twin", &twin).await, Err(Error::Fenced { newest, .. }) if newest == t2)
    );
    let object = fence.get("r.csv").await.unwrap().unwrap();
    assert_eq!(object.body, b"two");
    assert_eq!(object.etag, w2.etag);
    let token = object.token.unwrap();
    assert_eq!(
        (token.lock(), token.value(), token.holder()),
        ("report", t2, second.holder())
    );
    second.unlock().await.unwrap();
}

#[tokio::test]
async fn another_locks_token_is_refused_and_unusual_names_round_trip() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::mismatch") else {
        return;
    };
    let fence = moto.fence();
    // A key with spaces and slashes (encoded in the path and signed so; moto checks
    // signatures over the path as werkzeug shows it, which leaves non-ASCII and some
    // punctuation decoded, so such keys are not tried here); a lock name and holder that
    // are not ASCII (percent-encoded in the metadata).
    let key = "reports/2026 12/a file~1.csv";
    let mine = Token::new("rapport été", 3).with_holder("hôte:1");
    fence.put(key, "ok", &mine).await.unwrap();
    let object = fence.get(key).await.unwrap().unwrap();
    assert_eq!(object.token, Some(mine.clone()));
    match fence.put(key, "x", &Token::new("other", 99)).await {
        Err(Error::FenceMismatch {
            resource,
            lock,
            fenced_by,
        }) => {
            assert_eq!(
                (resource.as_str(), lock.as_str(), fenced_by.as_str()),
                (key, "other", "rapport été")
            );
        }
        other => panic!("expected Error::FenceMismatch, got {other:?}"),
    }
    assert_eq!(read(&fence, key).await, ("ok".to_string(), Some(3)));
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::bad_input") else {
        return;
    };
    let server = RedisServer::start();
    let fence = moto.fence();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let plain = client.lock("plain").lock().await.unwrap();
    assert!(matches!(
        fence.put("k", "x", &plain).await,
        Err(Error::Unsupported { .. })
    ));
    let t = Token::new("l", 1);
    assert!(matches!(
        fence.put("", "x", &t).await,
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        fence.put(&"k".repeat(1025), "x", &t).await,
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(fence.get("").await, Err(Error::InvalidName(_))));
    assert!(matches!(
        fence.put("k", "x", &Token::new("l", 0)).await,
        Err(Error::InvalidCount(_))
    ));
    assert!(matches!(
        fence.put("k", "x", &Token::new("l", u64::MAX)).await,
        Err(Error::InvalidCount(_))
    ));
    assert!(matches!(
        fence.put("k", "x", &Token::new("", 1)).await,
        Err(Error::InvalidName(_))
    ));
    // A lock name too long for S3's 2 KB of metadata.
    let huge = Token::new("l".repeat(3000), 1);
    assert!(
        matches!(fence.put("k", "x", &huge).await, Err(Error::InvalidName(m)) if m.contains("metadata"))
    );
    let zero = fence.clone().timeout(Duration::ZERO);
    assert!(matches!(
        zero.put("k", "x", &t).await,
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        fence.clone().attempts(0).put("k", "x", &t).await,
        Err(Error::Config { .. })
    ));
    assert_eq!(fence.get("k").await.unwrap(), None, "nothing was written");
    for endpoint in [
        "",
        "127.0.0.1:9000",
        "ftp://127.0.0.1",
        "http://127.0.0.1:9000/path",
        "http://u:p@127.0.0.1",
    ] {
        let made = S3Fence::new(endpoint, BUCKET, REGION, "id", "secret");
        assert!(
            matches!(made, Err(Error::Config { .. })),
            "{endpoint:?}: {made:?}"
        );
    }
    for bucket in ["", "ab", "Upper", "under_score", &"b".repeat(64)] {
        let made = S3Fence::new(&moto.endpoint(), bucket, REGION, "id", "secret");
        assert!(
            matches!(made, Err(Error::InvalidName(_))),
            "{bucket:?}: {made:?}"
        );
    }
    assert!(matches!(
        S3Fence::new(&moto.endpoint(), BUCKET, "", "id", "s"),
        Err(Error::Config { .. })
    ));
    plain.unlock().await.unwrap();
}

#[tokio::test]
async fn a_missing_bucket_is_named_and_permanent() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::no_bucket") else {
        return;
    };
    let fence = S3Fence::new(
        &moto.endpoint(),
        "no-such-bucket",
        REGION,
        moto.key_id(),
        moto.secret(),
    )
    .unwrap();
    let err = fence.put("k", "x", &Token::new("l", 1)).await.unwrap_err();
    assert!(err.is_permanent() && !err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains("no-such-bucket"), "{err}");
    assert_eq!(problem(Err::<(), _>(err)), StoreProblem::NoBucket);
    assert_eq!(problem(fence.get("k").await), StoreProblem::NoBucket);
}

#[tokio::test]
async fn wrong_credentials_are_refused_typed_and_the_secret_never_printed() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::credentials") else {
        return;
    };
    let secret = "WRONG-secret-0123456789abcdefghijklmnopqr";
    let t = Token::new("l", 1);
    let wrong_secret =
        S3Fence::new(&moto.endpoint(), BUCKET, REGION, moto.key_id(), secret).unwrap();
    let unknown_key = S3Fence::new(
        &moto.endpoint(),
        BUCKET,
        REGION,
        "AKIANOSUCHKEY0000000",
        moto.secret(),
    )
    .unwrap();
    for fence in [&wrong_secret, &unknown_key] {
        let err = fence.put("k", "x", &t).await.unwrap_err();
        let shown = format!("{err} {err:?} {fence:?}");
        assert!(
            !shown.contains(secret) && !shown.contains(moto.secret()),
            "a secret printed: {shown}"
        );
        assert!(err.is_permanent(), "{err:?}");
        assert_eq!(problem(Err::<(), _>(err)), StoreProblem::Unauthorized);
        assert_eq!(problem(fence.get("k").await), StoreProblem::Unauthorized);
    }
    // The right key still works, and nothing of the refused writes landed.
    assert_eq!(moto.fence().get("k").await.unwrap(), None);
}

#[tokio::test]
async fn a_store_down_or_silent_fails_typed_within_the_bound() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::down") else {
        return;
    };
    let t = Token::new("l", 1);
    let bound = Duration::from_millis(500);
    // Silent: a port that accepts connections and never answers.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = moto.fence_at(&format!("http://{}", hung.local_addr().unwrap()), bound);
    let began = Instant::now();
    let err = silent.put("k", "x", &t).await.unwrap_err();
    assert!(
        began.elapsed() <= bound + SLACK,
        "took {:?}",
        began.elapsed()
    );
    assert!(err.is_timeout() && err.is_unavailable(), "{err:?}");
    assert_eq!(problem(Err::<(), _>(err)), StoreProblem::TimedOut);
    // Down: the server stopped, its port refusing connections.
    let fence = moto.fence_at(&moto.endpoint(), bound);
    fence.put("k", "x", &t).await.unwrap();
    moto.stop();
    let began = Instant::now();
    let err = fence.put("k", "y", &t).await.unwrap_err();
    assert!(
        began.elapsed() <= bound + SLACK,
        "took {:?}",
        began.elapsed()
    );
    assert!(err.is_unavailable() && !err.is_permanent(), "{err:?}");
    assert_eq!(problem(Err::<(), _>(err)), StoreProblem::Unavailable);
    assert_eq!(problem(fence.get("k").await), StoreProblem::Unavailable);
}

#[tokio::test]
async fn an_object_written_without_a_fence_is_taken_over_by_the_first_fenced_write() {
    let Some(moto) = MotoServer::start_or_skip("fence_s3::takeover") else {
        return;
    };
    let fence = moto.fence();
    // The unfenced write records its token but checks nothing: an older one lands.
    fence
        .put_unfenced("k", "new", &Token::new("l", 5))
        .await
        .unwrap();
    fence
        .put_unfenced("k", "old", &Token::new("l", 2))
        .await
        .unwrap();
    assert_eq!(read(&fence, "k").await, ("old".to_string(), Some(2)));
    // A fenced write reads the token the object carries: 1 is refused, 3 passes.
    assert!(matches!(
        fence.put("k", "x", &Token::new("l", 1)).await,
        Err(Error::Fenced { newest: 2, .. })
    ));
    fence.put("k", "fenced", &Token::new("l", 3)).await.unwrap();
    assert_eq!(read(&fence, "k").await, ("fenced".to_string(), Some(3)));
    assert_eq!(TOKEN_HEADER, "x-amz-meta-redlatch-fence");
    // HasToken for references and tokens alike.
    let by_ref: &Token = &Token::new("l", 4);
    fence.put("k", "four", &by_ref).await.unwrap();
    assert_eq!(by_ref.token().unwrap().value(), 4);
}
