//! The backend against real servers on loopback: moto's S3 server and
//! Azurite, installed and started by the test itself.

use bytes::Bytes;
use std::sync::OnceLock;
use tdb_object_store::{Config, ObjectStorage};
use tdb_storage::{ReadableStorage, StorageError, WritableStorage};
use tdb_test_servers::{Azurite, S3Server};

/// One S3 server for every test of this binary (each test uses a bucket of
/// its own).
fn s3() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| S3Server::start().unwrap_or_else(|e| panic!("S3 server: {e}")))
}

fn s3_config(server: &S3Server) -> Config {
    server.settings().into_iter().collect()
}

/// Storage below `s3://BUCKET/prefix` in a new bucket.
fn s3_storage(bucket: &str) -> ObjectStorage {
    let server = s3();
    server.create_bucket(bucket).unwrap();
    ObjectStorage::open(&format!("s3://{bucket}/some/prefix"), &s3_config(server)).unwrap()
}

#[test]
fn s3_passes_the_storage_conformance_suite() {
    tdb_storage::conformance::run(&s3_storage("conformance"));
}

#[test]
fn azurite_passes_the_storage_conformance_suite() {
    let server = Azurite::start().unwrap_or_else(|e| panic!("Azurite: {e}"));
    server.create_container("conformance").unwrap();
    let config: Config = server.config().into_iter().collect();
    let s = ObjectStorage::open("az://conformance/a/b", &config).unwrap();
    tdb_storage::conformance::run(&s);
}

#[test]
fn tiledb_config_names_reach_the_server() {
    let server = s3();
    server.create_bucket("tiledb-names").unwrap();
    let config = Config::new()
        .set("vfs.s3.endpoint_override", server.host_port())
        .set("vfs.s3.scheme", "http")
        .set("vfs.s3.use_virtual_addressing", "false")
        .set("vfs.s3.region", "us-east-1")
        .set("vfs.s3.aws_access_key_id", "k")
        .set("vfs.s3.aws_secret_access_key", "s");
    let s = ObjectStorage::open("s3://tiledb-names/x", &config).unwrap();
    s.write("f", Bytes::from_static(b"hello")).unwrap();
    assert_eq!(&s.read("f").unwrap().unwrap()[..], b"hello");
    assert_eq!(s.uri("f").as_deref(), Some("s3://tiledb-names/x/f"));
}

/// Files larger than a part go up as multipart uploads of 5 MiB parts and
/// appear whole only when finished; one dropped unfinished leaves nothing.
#[test]
fn large_uploads_go_in_parts_and_appear_whole() {
    let s = s3_storage("multipart");
    let part = |i: usize| Bytes::from(vec![i as u8; 1 << 20]);
    let mut u = s.upload("big").unwrap();
    let mut want = Vec::new();
    for i in 0..12 {
        want.extend_from_slice(&part(i));
        u.put(part(i)).unwrap();
    }
    assert_eq!(s.read("big").unwrap(), None, "invisible before finish");
    u.finish().unwrap();
    let got = s.read("big").unwrap().unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "every byte in order");
    let mut u = s.upload("dropped").unwrap();
    for i in 0..7 {
        u.put(part(i)).unwrap();
    }
    drop(u);
    assert_eq!(s.read("dropped").unwrap(), None);
}

#[test]
fn a_wrong_bucket_says_so() {
    let server = s3();
    let s = ObjectStorage::open("s3://no-such-bucket/x", &s3_config(server)).unwrap();
    for e in [
        s.read("a").unwrap_err(),
        tdb_storage::ListableStorage::list_dir(&s, "").unwrap_err(),
    ] {
        let text = e.to_string();
        assert!(
            matches!(e, StorageError::Backend { .. }) && text.contains("s3://no-such-bucket/x"),
            "{text}"
        );
        assert!(text.contains("bucket does not exist"), "{text}");
    }
}

/// `s3://bucket/x` at an S3 endpoint on loopback `port`, retrying `tries`
/// times.
fn at_port(port: u16, tries: u32) -> ObjectStorage {
    let config = Config::new()
        .set("vfs.s3.endpoint_override", format!("127.0.0.1:{port}"))
        .set("vfs.s3.scheme", "http")
        .set("vfs.s3.use_virtual_addressing", "false")
        .set("vfs.s3.connect_max_tries", tries.to_string())
        .set("aws_access_key_id", "k")
        .set("aws_secret_access_key", "s")
        .set("aws_region", "us-east-1");
    ObjectStorage::open("s3://bucket/x", &config).unwrap()
}

#[test]
fn an_unreachable_endpoint_says_what_to_set() {
    // A port nothing listens on; no retries, so the test is quick.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = at_port(port, 0);
    let e = s.read("a").unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, StorageError::Backend { .. }), "{text}");
    assert!(
        text.contains("s3://bucket/x/a") && text.contains("AWS_ENDPOINT_URL"),
        "{text}"
    );
}

/// A server that answers every request with `status`, counting them.
fn always(status: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                // One request per read (no bodies here), answered, the
                // connection kept for the next.
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                    let answer =
                        format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nRetry-After: 0\r\n\r\n");
                    if conn.write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, count)
}

/// Throttling and server errors are retried, a bounded number of times
/// (`vfs.s3.connect_max_tries`), and then fail naming the URI.
#[test]
fn retries_on_throttling_and_server_errors_are_bounded() {
    for status in ["503 Service Unavailable", "500 Internal Server Error"] {
        let (port, count) = always(status);
        let s = at_port(port, 2);
        let started = std::time::Instant::now();
        let e = s.read("a").unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, StorageError::Backend { .. }),
            "{status}: {text}"
        );
        assert!(text.contains("s3://bucket/x/a"), "{status}: {text}");
        // The first try and two retries, then no more.
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "{status}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{status}"
        );
    }
}
