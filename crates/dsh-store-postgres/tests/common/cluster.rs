//! One throwaway PostgreSQL cluster per test binary, and a fresh database per test.
//!
//! The cluster runs as the `postgres` user when the tests run as root (initdb refuses root;
//! `runuser` switches), else as the current user, in a new temp directory,
//! listening on 127.0.0.1 at a free port with its socket in that directory. It is supervised by
//! a shell that holds the read end of a pipe whose write end lives in this process: when the
//! test binary exits (however it exits), or a private cluster is dropped, the pipe closes, the
//! shell stops the server with a fast shutdown (`pg_ctl stop`, so a server a fault test
//! restarted is stopped too) and removes the directory. Every wait is bounded.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_store_postgres::PostgresConfig;

/// Where the binaries are on Debian and on these machines.
const BIN_DIRS: &[&str] = &["/usr/local/bin", "/usr/bin"];

pub struct Cluster {
    pub port: u16,
    pub dir: PathBuf,
    data: PathBuf,
    /// Closing it (at process exit) stops the server.
    _lifeline: ChildStdin,
    /// The supervisor; it outlives this process by the moment it takes to stop the server.
    _supervisor: Child,
}

fn bin(name: &str) -> PathBuf {
    // Any Debian server version, newest first, then the fixed places.
    let mut versioned: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versioned.sort();
    versioned
        .into_iter()
        .rev()
        .chain(BIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("{name} not found under /usr/lib/postgresql/*/bin or {BIN_DIRS:?}: install postgresql")
        })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("running a cluster setup command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process runs as root, where initdb refuses to run and `runuser` is needed.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// `program` run as the `postgres` user when this process is root, else as this user.
fn as_server_user(program: &str) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--", program]);
        cmd
    } else {
        Command::new(program)
    }
}

/// A new cluster of its own, for a test that stops or restarts the server; stopped and
/// removed when dropped.
pub fn start() -> Cluster {
    let dir = std::env::temp_dir().join(format!(
        "dsh-pg-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir(&dir).unwrap();
    if is_root() {
        run(Command::new("chown").arg("postgres:").arg(&dir));
    }
    let data = dir.join("data");
    run(as_server_user("timeout")
        .arg("120")
        .arg(bin("initdb"))
        .arg("-D")
        .arg(&data)
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The server's own durability is not under test (clients are killed, not the server), so
    // fsync is off to spare the shared machine's disk; `DSH_PG_TEST_FSYNC=on` turns it on (for
    // benchmark figures comparable with the JSONL store's fdatasync).
    let script = r#"
        "$1" -D "$2" -k "$3" -p "$4" -h 127.0.0.1 -c fsync="$6" -c max_connections=200 \
            >"$3/server.log" 2>&1 &
        pid=$!
        read _ || true
        "$5" -D "$2" stop -m fast -w -t 60 >/dev/null 2>&1 || kill -INT "$pid"
        wait "$pid"
        rm -rf "$3"
    "#;
    let mut child = as_server_user("sh")
        .args(["-c", script, "supervisor"])
        .arg(bin("postgres"))
        .arg(&data)
        .arg(&dir)
        .arg(port.to_string())
        .arg(bin("pg_ctl"))
        .arg(std::env::var("DSH_PG_TEST_FSYNC").unwrap_or_else(|_| "off".to_owned()))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting postgres");
    let lifeline = child.stdin.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "postgres did not listen on port {port} within 60 s; see {}/server.log",
            dir.display()
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "postgres exited at startup; see {}/server.log",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Cluster {
        port,
        dir,
        data,
        _lifeline: lifeline,
        _supervisor: child,
    }
}

/// The cluster of this test binary, started on first use.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(start)
}

impl Cluster {
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// `pg_ctl ACTION` on this cluster's data directory, waiting (bounded) for it to finish.
    fn pg_ctl(&self, action: &str) {
        run(as_server_user("timeout")
            .arg("120")
            .arg(bin("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "-t", "60", "-l"])
            .arg(self.dir.join("server.log"))
            .arg(action));
    }

    /// Restarts the server (a fast shutdown: every connection is cut), as an upgrade or a
    /// failover does; returns once it accepts connections again.
    pub fn restart(&self) {
        // `restart` starts it again with the options it was started with (`postmaster.opts`).
        self.pg_ctl("restart");
    }

    /// Stops the server; [`Cluster::restart`] starts it again.
    pub fn stop(&self) {
        self.pg_ctl("stop");
    }
}

/// A new empty database on the cluster; returns its name and a store config for it.
pub async fn fresh_db() -> (String, PostgresConfig) {
    fresh_db_on(cluster()).await
}

/// A new empty database on `c`.
pub async fn fresh_db_on(c: &Cluster) -> (String, PostgresConfig) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "dsh_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    // The server accepts TCP before it accepts sessions ("starting up"): retry, bounded.
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        match admin_connect(&c.url("postgres")).await {
            Ok(client) => break client,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("cannot connect to the test cluster: {e}"),
        }
    };
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    (
        name.clone(),
        PostgresConfig::from_url(&c.url(&name)).unwrap(),
    )
}

/// A plain client for assertions on the tables themselves.
pub async fn admin_connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// Cuts every connection to database `db` on the shared cluster, as a server restart, a dropped
/// proxy or a partition does (the writer leases held on them die too); returns how many.
pub async fn cut_connections(db: &str) -> u64 {
    let admin = admin_connect(&cluster().url("postgres")).await.unwrap();
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db],
        )
        .await
        .unwrap()
}
