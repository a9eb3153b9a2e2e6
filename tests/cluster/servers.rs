//! Throwaway PostgreSQL, MariaDB, Redis and Redis Cluster servers on
//! 127.0.0.1, one set per test, so a test may stop, flush or kill them
//! without touching anyone else.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false)
}

/// Runs a PostgreSQL binary, as the `postgres` user when we are root
/// (initdb refuses root).
fn pg_command(bin: &Path, args: &[&str]) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin).args(args);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(args);
        c
    }
}

/// A PostgreSQL cluster in a temporary folder.
pub struct Postgres {
    pub url: String,
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Postgres {
    /// initdb + start on a free port, trust auth.
    pub fn start() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL binaries under /usr/lib/postgresql")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .max()
            .expect("an initdb");
        let dir = tempfile::Builder::new().prefix("xtimer-pg").tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
            Command::new("chown").arg("postgres").arg(&data).status().unwrap();
        }
        let out = pg_command(&bin.join("initdb"), &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let pg = Self { url: format!("postgres://postgres@127.0.0.1:{port}/postgres"), bin, data, port, _dir: dir };
        pg.up();
        pg
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`), started on a
    /// free port: read-only until [`Postgres::promote`].
    #[allow(dead_code)]
    pub fn standby_of(primary: &Postgres) -> Self {
        Self::standby_through(primary, primary.port)
    }

    /// [`Postgres::standby_of`] replicating through `port` of 127.0.0.1
    /// (a fault proxy to the primary, which a test can cut).
    #[allow(dead_code)]
    pub fn standby_through(primary: &Postgres, port: u16) -> Self {
        let dir = tempfile::Builder::new().prefix("xtimer-pg-standby").tempdir().unwrap();
        let data = dir.path().join("data");
        if is_root() {
            Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
            Command::new("chown").arg("postgres").arg(dir.path()).status().unwrap();
        }
        let port = port.to_string();
        let out = pg_command(
            &primary.bin.join("pg_basebackup"),
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-D", data.to_str().unwrap(), "-R", "-X", "stream"],
        )
        .stdout(Stdio::null())
        .output()
        .unwrap();
        assert!(out.status.success(), "pg_basebackup: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let standby = Self {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            bin: primary.bin.clone(),
            data,
            port,
            _dir: dir,
        };
        standby.up();
        standby
    }

    /// `host:port` of the server.
    #[allow(dead_code)]
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Promotes a standby to primary (`pg_ctl promote`, waiting for it).
    #[allow(dead_code)]
    pub fn promote(&self) {
        let out = pg_command(&self.bin.join("pg_ctl"), &["-D", self.data.to_str().unwrap(), "-w", "promote"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl promote: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Kills the server as a crash would (immediate stop: no checkpoint,
    /// connections dropped).
    #[allow(dead_code)]
    pub fn crash(&self) {
        let out =
            pg_command(&self.bin.join("pg_ctl"), &["-D", self.data.to_str().unwrap(), "-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .output()
                .unwrap();
        assert!(out.status.success(), "pg_ctl stop -m immediate: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Starts the server (again).
    pub fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200",
            self.port,
            self.data.display()
        );
        let log = self.data.join("server.log");
        let out = pg_command(
            &self.bin.join("pg_ctl"),
            &["-D", self.data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-w", "-o", &opts, "start"],
        )
        .stdout(Stdio::null())
        .output()
        .unwrap();
        assert!(out.status.success(), "pg_ctl start: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Stops the server (fast shutdown: connections are cut), waits `down`,
    /// starts it again. Blocks: call it off the async workers. (Used by the
    /// chaos run, `tests/chaos.rs`.)
    #[allow(dead_code)]
    pub fn restart(&self, down: Duration) {
        self.down();
        std::thread::sleep(down);
        self.up();
    }

    /// Stops the server (fast shutdown: connections are cut).
    pub fn down(&self) {
        let out =
            pg_command(&self.bin.join("pg_ctl"), &["-D", self.data.to_str().unwrap(), "-m", "fast", "-w", "stop"])
                .stdout(Stdio::null())
                .output()
                .unwrap();
        assert!(out.status.success(), "pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = pg_command(&self.bin.join("pg_ctl"), &["-D", self.data.to_str().unwrap(), "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs a MariaDB binary, as the `mysql` user when we are root.
fn mysql_command(bin: &str, args: &[&str]) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "mysql", "--", bin]).args(args);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(args);
        c
    }
}

/// A MariaDB server (MySQL's stand-in) in a temporary folder: no grant
/// tables (any user connects, like trust auth), no durability, and a
/// database `xtimer` for the nodes.
#[allow(dead_code)] // not every field is read by each test binary
pub struct Mariadb {
    pub url: String,
    data: PathBuf,
    port: u16,
    /// The running server (`runuser` when we are root).
    child: std::sync::Mutex<Option<std::process::Child>>,
    _dir: tempfile::TempDir,
}

#[allow(dead_code)]
impl Mariadb {
    /// mariadb-install-db + start on a free port.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new().prefix("xtimer-mysql").tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
            Command::new("chown").arg("mysql").arg(&data).status().unwrap();
        }
        let datadir = format!("--datadir={}", data.display());
        let out = mysql_command(
            "mariadb-install-db",
            &["--no-defaults", &datadir, "--auth-root-authentication-method=normal", "--skip-test-db"],
        )
        .output()
        .expect("mariadb-install-db on PATH (apt-get install mariadb-server)");
        assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let url = format!("mysql://root@127.0.0.1:{port}/xtimer");
        let db = Self { url, data, port, child: std::sync::Mutex::new(None), _dir: dir };
        db.up();
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root"])
            .args(["-e", "CREATE DATABASE xtimer"])
            .output()
            .unwrap();
        assert!(out.status.success(), "CREATE DATABASE: {}", String::from_utf8_lossy(&out.stderr));
        db
    }

    fn admin(&self, command: &str) -> std::process::Output {
        Command::new("mariadb-admin")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P", &self.port.to_string(), "-u", "root", command])
            .output()
            .unwrap()
    }

    /// Starts the server (again) and waits until it answers.
    pub fn up(&self) {
        let data = self.data.display();
        let args = [
            "--no-defaults".to_string(),
            format!("--datadir={data}"),
            format!("--port={}", self.port),
            "--bind-address=127.0.0.1".into(),
            format!("--socket={data}/mysqld.sock"),
            format!("--pid-file={data}/mysqld.pid"),
            "--skip-grant-tables".into(),
            "--skip-log-bin".into(),
            "--innodb-flush-log-at-trx-commit=0".into(),
            "--innodb-doublewrite=0".into(),
            "--max-connections=200".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = std::fs::File::create(self.data.join("server.log")).unwrap();
        let child = mysql_command("/usr/sbin/mariadbd", &args).stdout(Stdio::null()).stderr(log).spawn();
        *self.child.lock().unwrap() = Some(child.expect("mariadbd"));
        for _ in 0..300 {
            if self.admin("ping").status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("MariaDB did not start: {}", std::fs::read_to_string(self.data.join("server.log")).unwrap_or_default());
    }

    /// Stops the server (connections are cut), waits `down`, starts it
    /// again. Blocks: call it off the async workers. (Used by the chaos run.)
    pub fn restart(&self, down: Duration) {
        self.down();
        std::thread::sleep(down);
        self.up();
    }

    /// Stops the server (connections are cut) and waits until it is gone.
    pub fn down(&self) {
        let out = self.admin("shutdown");
        assert!(out.status.success(), "mariadb-admin shutdown: {}", String::from_utf8_lossy(&out.stderr));
        for _ in 0..300 {
            if !self.data.join("mysqld.pid").exists() {
                if let Some(mut child) = self.child.lock().unwrap().take() {
                    let _ = child.wait();
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("MariaDB did not stop");
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.data.join("mysqld.pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.wait();
        }
    }
}

/// A Redis server without persistence.
pub struct Redis {
    pub url: String,
    port: u16,
    child: std::process::Child,
}

impl Redis {
    /// Starts `redis-server` on a free port.
    pub async fn start() -> Self {
        let port = free_port();
        let child = Self::spawn(port).await;
        Self { url: format!("redis://127.0.0.1:{port}"), port, child }
    }

    /// Runs `redis-server` on `port` and waits until it accepts connections.
    async fn spawn(port: u16) -> std::process::Child {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (apt-get install redis-server)");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        child
    }

    /// Kills the server (SIGKILL: with no persistence every key is gone),
    /// waits `down`, and starts an empty one on the same port. (Used by the
    /// chaos run, `tests/chaos.rs`.)
    #[allow(dead_code)]
    pub async fn restart(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        tokio::time::sleep(down).await;
        self.child = Self::spawn(self.port).await;
    }

    /// `FLUSHALL`: the shard index and every lock are gone.
    pub fn flushall(&self) {
        let out = Command::new("redis-cli").args(["-u", &self.url, "FLUSHALL"]).output().unwrap();
        assert!(out.status.success());
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis master, its replica and one Sentinel watching them (quorum 1,
/// the master judged down after 1 s), no persistence.
#[allow(dead_code)]
pub struct RedisSentinel {
    /// `redis+sentinel://127.0.0.1:PORT/mymaster`.
    pub url: String,
    master: Option<std::process::Child>,
    _replica: ChildGuard,
    _sentinel: ChildGuard,
    _dir: tempfile::TempDir,
}

/// A child process killed when dropped.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[allow(dead_code)]
impl RedisSentinel {
    /// Starts the three, and waits until the replica has synced.
    pub async fn start() -> Self {
        let (master_port, replica_port, sentinel_port) = (free_port(), free_port(), free_port());
        let master = Redis::spawn(master_port).await;
        let dir = tempfile::tempdir().unwrap();
        // Its full sync writes an RDB file: in the temp folder, not the repo.
        let replica = Command::new("redis-server")
            .args(["--port", &replica_port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--replicaof", "127.0.0.1", &master_port.to_string()])
            .args(["--dir", dir.path().to_str().unwrap()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {sentinel_port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n"
            ),
        )
        .unwrap();
        let sentinel = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server --sentinel");
        for _ in 0..200 {
            let info =
                Command::new("redis-cli").args(["-p", &replica_port.to_string(), "INFO", "replication"]).output();
            let synced = info.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("master_link_status:up"));
            let watching = Command::new("redis-cli")
                .args(["-p", &sentinel_port.to_string(), "SENTINEL", "get-master-addr-by-name", "mymaster"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&master_port.to_string()));
            if synced && watching {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            url: format!("redis+sentinel://127.0.0.1:{sentinel_port}/mymaster"),
            master: Some(master),
            _replica: ChildGuard(replica),
            _sentinel: ChildGuard(sentinel),
            _dir: dir,
        }
    }

    /// Kills the master with SIGKILL: Sentinel promotes the replica.
    pub fn kill_master(&mut self) {
        if let Some(mut master) = self.master.take() {
            let _ = master.kill();
            let _ = master.wait();
        }
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        self.kill_master();
    }
}

/// A free port P whose cluster bus port, P + 10000, is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = rand::random_range(20_000..45_000u16);
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            return port;
        }
    }
}

/// A Redis Cluster of three masters (each with its replicas, if asked),
/// no persistence.
pub struct RedisCluster {
    /// The masters' URLs, comma-separated: a `redis.url` naming the cluster.
    pub url: String,
    masters: Vec<String>,
    /// Every server: its port and process.
    children: Vec<(u16, std::process::Child)>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts three `redis-server`s in cluster mode and joins them with
    /// `redis-cli --cluster create`; returns once every node reports the
    /// cluster ok.
    pub async fn start() -> Self {
        Self::start_with_replicas(0).await
    }

    /// [`RedisCluster::start`] with `replicas` replicas per master, and a
    /// node timeout of 1 s (a dead master's replica is promoted within a
    /// few seconds).
    pub async fn start_with_replicas(replicas: usize) -> Self {
        let dir = tempfile::Builder::new().prefix("xtimer-redis-cluster").tempdir().unwrap();
        let (mut children, mut addrs) = (Vec::new(), Vec::new());
        for _ in 0..3 * (1 + replicas) {
            let port = free_cluster_port();
            let config = dir.path().join(format!("nodes-{port}.conf"));
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file", config.to_str().unwrap()])
                .args(["--cluster-node-timeout", "1000"])
                .args(["--dir", dir.path().to_str().unwrap()])
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-server on PATH (apt-get install redis-server)");
            children.push((port, child));
            for _ in 0..100 {
                if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            addrs.push(format!("127.0.0.1:{port}"));
        }
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli on PATH");
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let all: Vec<String> = addrs.iter().map(|a| format!("redis://{a}")).collect();
        let masters = all.iter().take(3).cloned().collect::<Vec<_>>();
        let mut cluster = Self { url: masters.join(","), masters, children, _dir: dir };
        cluster.wait_ok(&all).await;
        // The masters as the cluster made them (replicas assigned by redis-cli).
        cluster.masters = all.into_iter().filter(|node| cluster.cli(node, &["ROLE"]).starts_with("master")).collect();
        cluster.url = cluster.masters.join(",");
        cluster
    }

    /// Waits until every node of `nodes` reports the cluster ok.
    async fn wait_ok(&self, nodes: &[String]) {
        for node in nodes {
            for attempt in 0.. {
                if self.cli(node, &["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                    break;
                }
                assert!(attempt < 400, "{node}: cluster not ok");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Kills master `index` with SIGKILL: its replica is promoted.
    #[allow(dead_code)]
    pub fn kill_master(&mut self, index: usize) {
        let port: u16 = self.masters[index].rsplit(':').next().unwrap().parse().unwrap();
        if let Some((_, child)) = self.children.iter_mut().find(|(p, _)| *p == port) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn cli(&self, master: &str, args: &[&str]) -> String {
        let out = Command::new("redis-cli").args(["-u", master]).args(args).output().unwrap();
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Keys on each master.
    pub fn keys_per_master(&self) -> Vec<u64> {
        self.masters.iter().map(|m| self.cli(m, &["DBSIZE"]).trim().parse().unwrap()).collect()
    }

    /// `FLUSHALL` on one master: the shards and locks in its slots are gone.
    pub fn flushall(&self, master: usize) {
        self.cli(&self.masters[master], &["FLUSHALL"]);
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
