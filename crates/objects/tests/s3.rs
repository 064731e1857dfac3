//! The object client against a real S3-compatible server: s3s-fs 0.14.1, installed by
//! `scripts/s3s-fs` (which `./scripts/test` runs first) and started here on a free port.

use bytes::Bytes;
use mote_objects::{ObjectError, Objects, ObjectsConfig, S3Endpoint};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ACCESS_KEY: &str = "mote-test";
const SECRET_KEY: &str = "mote-test-secret";

/// The s3s-fs binary: `$MOTE_S3S_FS`, or where `scripts/s3s-fs` installs it.
fn s3s_fs() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTE_S3S_FS") {
        return path.into();
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/s3s-fs-0.14.1/bin/s3s-fs");
    assert!(
        path.exists(),
        "s3s-fs is not installed at {}: run ./scripts/s3s-fs (./scripts/test does), or set \
         MOTE_S3S_FS to an s3s-fs binary",
        path.display()
    );
    path
}

/// A running s3s-fs over a temporary directory; killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    root: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let root = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            child: spawn(root.path(), port),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            root,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(self.addr).is_err() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "s3s-fs exited before it listened on {}: {status}",
                    self.addr
                );
            }
            assert!(
                Instant::now() < deadline,
                "s3s-fs did not listen on {}",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.kill();
        self.child = spawn(self.root.path(), self.addr.port());
        self.wait_ready();
    }

    /// Creates bucket `name`: s3s-fs keeps a bucket as a directory under its root.
    fn bucket(&self, name: &'static str) -> &'static str {
        std::fs::create_dir(self.root.path().join(name)).unwrap();
        name
    }

    fn client(&self, secret_key: &str) -> Objects {
        Objects::new(ObjectsConfig::S3(S3Endpoint {
            url: format!("http://{}", self.addr),
            region: "us-east-1".into(),
            access_key: ACCESS_KEY.into(),
            secret_key: secret_key.into(),
        }))
        .unwrap()
    }
}

fn spawn(root: &Path, port: u16) -> Child {
    Command::new(s3s_fs())
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting s3s-fs")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn objects_round_trip_through_a_real_s3_server() {
    let server = Server::start();
    let bucket = server.bucket("sort-data");
    let objects = server.client(SECRET_KEY);

    let big = Bytes::from((0..3 << 20).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    objects
        .put(bucket, "input/part-1", big.clone())
        .await
        .unwrap();
    objects
        .put(bucket, "input/part-0", Bytes::from_static(b"zero"))
        .await
        .unwrap();
    objects.put(bucket, "output", Bytes::new()).await.unwrap();
    assert_eq!(
        objects.get(bucket, "input/part-1", 4 << 20).await.unwrap(),
        big
    );
    assert!(objects.get(bucket, "output", 0).await.unwrap().is_empty());

    let listing = objects.list(bucket, "input/", 10).await.unwrap();
    let keys: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.size))
        .collect();
    assert_eq!(keys, [("input/part-0", 4), ("input/part-1", 3 << 20)]);
    assert_eq!(objects.list(bucket, "", 2).await.unwrap().entries.len(), 2);
    assert!(objects.list(bucket, "", 2).await.unwrap().truncated);
    // A truncated listing continues from its last key, the server skipping to it.
    let first = objects.list(bucket, "", 1).await.unwrap();
    assert!(first.truncated);
    let after = &first.entries[0].key;
    let rest = objects.list_after(bucket, "", after, 10).await.unwrap();
    let rest: Vec<_> = rest.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(rest, ["input/part-1", "output"]);
    let tail = objects.list_after(bucket, "input/", "input/part-0", 10);
    assert_eq!(tail.await.unwrap().entries.len(), 1);

    objects.delete(bucket, "input/part-0").await.unwrap();
    objects.delete(bucket, "input/part-0").await.unwrap();
    let e = objects.get(bucket, "input/part-0", 10).await.unwrap_err();
    assert!(matches!(e, ObjectError::NoSuchKey { .. }), "{e:?}");

    // A job's commit: a staged part renamed into place (a server-side copy and a delete).
    objects
        .put(
            bucket,
            "out/_temporary/7/part-00000",
            Bytes::from_static(b"done\n"),
        )
        .await
        .unwrap();
    objects
        .rename(bucket, "out/_temporary/7/part-00000", "out/part-00000")
        .await
        .unwrap();
    let out = objects.list(bucket, "out/", 10).await.unwrap();
    let out: Vec<_> = out.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(out, ["out/part-00000"]);
    assert_eq!(
        &objects.get(bucket, "out/part-00000", 10).await.unwrap()[..],
        b"done\n"
    );
}

#[tokio::test]
async fn missing_buckets_and_keys_and_large_objects_get_precise_errors() {
    let server = Server::start();
    let bucket = server.bucket("data");
    let objects = server.client(SECRET_KEY);

    let e = objects.get(bucket, "absent", 10).await.unwrap_err();
    assert!(matches!(e, ObjectError::NoSuchKey { .. }), "{e:?}");
    assert_eq!(e.to_string(), "no object `absent` in bucket `data`");

    // s3s-fs creates a missing bucket's directory on a put and answers a get with NoSuchKey,
    // unlike S3; a listing is where it says NoSuchBucket.
    let e = objects.list("nowhere", "", 10).await.unwrap_err();
    assert!(matches!(e, ObjectError::NoSuchBucket { .. }), "{e:?}");
    assert!(e.to_string().contains("create it on the S3 server"), "{e}");

    objects
        .put(bucket, "big", Bytes::from(vec![1; 5000]))
        .await
        .unwrap();
    let e = objects.get(bucket, "big", 4096).await.unwrap_err();
    assert!(
        matches!(
            e,
            ObjectError::TooLarge {
                size: 5000,
                limit: 4096,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn wrong_credentials_are_refused_and_say_so() {
    let server = Server::start();
    let bucket = server.bucket("data");
    let e = server
        .client("not-the-secret")
        .put(bucket, "k", Bytes::from_static(b"v"))
        .await
        .unwrap_err();
    assert!(matches!(e, ObjectError::Denied { .. }), "{e:?}");
    assert!(
        e.to_string().contains("check the access key and secret"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("403 Forbidden (SignatureDoesNotMatch)"),
        "{e}"
    );
    assert!(
        std::fs::read_dir(server.root.path().join(bucket))
            .unwrap()
            .next()
            .is_none(),
        "nothing was written"
    );
}

#[tokio::test]
async fn an_unreachable_server_fails_fast_and_a_restarted_one_has_lost_nothing() {
    let mut server = Server::start();
    let bucket = server.bucket("data");
    let objects = server.client(SECRET_KEY);
    for i in 0..20 {
        let body = Bytes::from(format!("object {i}"));
        objects
            .put(bucket, &format!("k/{i:02}"), body)
            .await
            .unwrap();
    }

    server.kill();
    let started = Instant::now();
    let e = objects.get(bucket, "k/00", 100).await.unwrap_err();
    assert!(matches!(e, ObjectError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains(&server.addr.to_string()), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );

    server.restart();
    let listing = objects.list(bucket, "k/", 100).await.unwrap();
    assert_eq!(listing.entries.len(), 20);
    for i in 0..20 {
        let body = objects
            .get(bucket, &format!("k/{i:02}"), 100)
            .await
            .unwrap();
        assert_eq!(body, format!("object {i}").as_bytes());
    }
}

#[tokio::test]
async fn a_server_that_never_listened_is_unreachable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let objects = Objects::new(ObjectsConfig::S3(S3Endpoint {
        url: format!("http://127.0.0.1:{port}"),
        region: "us-east-1".into(),
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
    }))
    .unwrap();
    let e = objects.put("data", "k", Bytes::new()).await.unwrap_err();
    assert!(matches!(e, ObjectError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("is it running"), "{e}");
    assert!(e.to_string().contains("Connection refused"), "{e}");
}
