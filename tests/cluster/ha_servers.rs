//! Throwaway highly available databases on 127.0.0.1, for the failover
//! runs (`failover.rs`): PostgreSQL under Patroni with etcd (a primary and
//! its synchronous standby, optionally behind HAProxy on Patroni's
//! `/primary` check) and a three-node MariaDB Galera cluster. Free ports,
//! data in a temporary folder; everything is killed when dropped.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 below the ephemeral range (32768 and up), so
/// no outgoing connection takes it between now and the server's start
/// (a Galera node joins tens of seconds after its ports are chosen).
pub fn free_port() -> u16 {
    loop {
        let port = rand::random_range(20_000..32_000u16);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A user's uid and gid (`id -u`, `id -g`), when we are root and it
/// exists: servers that refuse root run as it.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").arg(flag).arg(user).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let me = Command::new("id").arg("-u").output().ok()?;
    if !me.stdout.starts_with(b"0") {
        return None;
    }
    Some((id("-u")?, id("-g")?))
}

/// `cmd` run as `user` when we are root (the process is the server
/// itself, so killing it kills the server).
fn as_user(mut cmd: Command, user: &str, dir: &Path) -> Command {
    if let Some((uid, gid)) = user_ids(user) {
        Command::new("chown").arg("-R").arg(format!("{uid}:{gid}")).arg(dir).status().unwrap();
        cmd.uid(uid).gid(gid);
    }
    cmd
}

/// Sends SIGKILL to process `pid`.
fn kill_9(pid: u32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).stderr(Stdio::null()).status();
}

/// A process's output, appended to `path`.
fn log_to(cmd: &mut Command, path: &Path) {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    cmd.stdout(file.try_clone().unwrap()).stderr(file);
}

/// Waits up to `within` for `ready`, polling every 200 ms.
async fn wait_for(within: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < within, "{what} not ready within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The HTTP status of `GET http://127.0.0.1:port/path` (0 if none).
async fn http_status(port: u16, path: &str) -> u16 {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build().unwrap();
    match http.get(format!("http://127.0.0.1:{port}{path}")).send().await {
        Ok(reply) => reply.status().as_u16(),
        Err(_) => 0,
    }
}

/// One PostgreSQL server under its Patroni.
struct Member {
    pg_port: u16,
    api_port: u16,
    data: PathBuf,
    patroni: Option<Child>,
}

impl Member {
    /// The postmaster's pid, from its `postmaster.pid`.
    fn postmaster(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Kills Patroni and its PostgreSQL with SIGKILL: the host died.
    fn kill(&mut self) {
        if let Some(mut patroni) = self.patroni.take() {
            let _ = patroni.kill();
            let _ = patroni.wait();
        }
        if let Some(pid) = self.postmaster() {
            kill_9(pid);
        }
    }
}

/// PostgreSQL under Patroni: one etcd, two members (a leader and its
/// synchronous standby: `synchronous_mode: true`), leader key TTL 10 s,
/// and HAProxy in front if asked.
pub struct Patroni {
    /// The nodes' `database.url`: the multi-host URL
    /// (`target_session_attrs=read-write`), or HAProxy's address.
    pub url: String,
    members: Vec<Member>,
    etcd: Option<Child>,
    haproxy: Option<Child>,
    dir: tempfile::TempDir,
}

/// The Patroni executable: `XTIMER_PATRONI`, else Debian's (it runs under
/// the system Python, which the `postgres` user can reach), else `patroni`.
fn patroni_bin() -> String {
    std::env::var("XTIMER_PATRONI")
        .unwrap_or_else(|_| if Path::new("/usr/bin/patroni").exists() { "/usr/bin/patroni" } else { "patroni" }.into())
}

/// The newest PostgreSQL server binaries.
fn pg_bin() -> PathBuf {
    std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL binaries under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .max()
        .expect("an initdb")
}

impl Patroni {
    /// Starts etcd, then the first member (it bootstraps the cluster and
    /// leads), then the second (it clones the first and becomes its
    /// synchronous standby), then HAProxy when `haproxy`; returns once the
    /// standby is synchronous (and HAProxy sees the primary).
    pub async fn start(haproxy: bool) -> Self {
        let dir = tempfile::Builder::new().prefix("xtimer-patroni").tempdir().unwrap();
        Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
        let (etcd_client, etcd_peer) = (free_port(), free_port());
        let mut etcd = Command::new("etcd");
        etcd.args(["--name", "e1", "--data-dir"])
            .arg(dir.path().join("etcd"))
            .args(["--listen-client-urls", &format!("http://127.0.0.1:{etcd_client}")])
            .args(["--advertise-client-urls", &format!("http://127.0.0.1:{etcd_client}")])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{etcd_peer}")])
            .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{etcd_peer}")])
            .args(["--initial-cluster", &format!("e1=http://127.0.0.1:{etcd_peer}")]);
        log_to(&mut etcd, &dir.path().join("etcd.log"));
        let etcd = etcd.spawn().expect("etcd on PATH (apt-get install etcd-server)");
        let mut patroni = Self { url: String::new(), members: Vec::new(), etcd: Some(etcd), haproxy: None, dir };
        wait_for(Duration::from_secs(20), "etcd", || std::net::TcpStream::connect(("127.0.0.1", etcd_client)).is_ok())
            .await;
        for n in 1..=2 {
            patroni.start_member(n, etcd_client);
            let api = patroni.members[n - 1].api_port;
            if n == 1 {
                let mut up = false;
                for _ in 0..300 {
                    if http_status(api, "/primary").await == 200 {
                        up = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                assert!(up, "Patroni's first member did not lead within 60 s: {}", patroni.logs());
            }
        }
        let mut synchronous = false;
        for _ in 0..300 {
            if http_status(patroni.members[1].api_port, "/sync").await == 200 {
                synchronous = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(synchronous, "the second member is no synchronous standby within 60 s: {}", patroni.logs());
        let hosts: Vec<String> = patroni.members.iter().map(|m| format!("127.0.0.1:{}", m.pg_port)).collect();
        patroni.url = format!("postgres://postgres@{}/postgres?target_session_attrs=read-write", hosts.join(","));
        if haproxy {
            let port = patroni.start_haproxy();
            for _ in 0..100 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Its first checks, a second apart.
            tokio::time::sleep(Duration::from_secs(2)).await;
            patroni.url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        }
        patroni
    }

    /// Writes member `n`'s configuration and starts its Patroni.
    fn start_member(&mut self, n: usize, etcd_client: u16) {
        let (pg_port, api_port) = (free_port(), free_port());
        let dir = self.dir.path();
        let data = dir.join(format!("data{n}"));
        let config = dir.join(format!("pg{n}.yml"));
        std::fs::write(
            &config,
            format!(
                "scope: xtimer\nname: pg{n}\n\
                 restapi:\n  listen: 127.0.0.1:{api_port}\n  connect_address: 127.0.0.1:{api_port}\n\
                 etcd3:\n  hosts: 127.0.0.1:{etcd_client}\n\
                 bootstrap:\n  dcs:\n    ttl: 10\n    loop_wait: 1\n    retry_timeout: 4\n    synchronous_mode: true\n\
                 \x20   postgresql:\n      use_pg_rewind: false\n      parameters:\n        max_connections: 300\n\
                 \x20 initdb:\n    - encoding: UTF8\n    - auth: trust\n\
                 postgresql:\n  listen: 127.0.0.1:{pg_port}\n  connect_address: 127.0.0.1:{pg_port}\n\
                 \x20 data_dir: {data}\n  bin_dir: {bin}\n  pgpass: {dir}/pgpass{n}\n\
                 \x20 authentication:\n    superuser: {{username: postgres}}\n    replication: {{username: postgres}}\n\
                 \x20 parameters:\n    unix_socket_directories: {dir}\n    fsync: 'off'\n\
                 \x20 pg_hba:\n    - local all all trust\n    - host all all 127.0.0.1/32 trust\n\
                 \x20   - host replication all 127.0.0.1/32 trust\n",
                data = data.display(),
                bin = pg_bin().display(),
                dir = dir.display(),
            ),
        )
        .unwrap();
        let mut cmd = Command::new(patroni_bin());
        cmd.arg(&config);
        log_to(&mut cmd, &dir.join(format!("pg{n}.log")));
        let child = as_user(cmd, "postgres", dir).spawn().expect("patroni (apt-get install patroni)");
        self.members.push(Member { pg_port, api_port, data, patroni: Some(child) });
    }

    /// HAProxy on a free port, sending connections to the member whose
    /// Patroni answers 200 on `/primary` (checked every second, down after
    /// two failed checks, its connections shut then); returns the port.
    fn start_haproxy(&mut self) -> u16 {
        let port = free_port();
        let servers: String = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("  server pg{} 127.0.0.1:{} check port {}\n", i + 1, m.pg_port, m.api_port))
            .collect();
        let config = self.dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n  maxconn 2000\n\
                 defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30m\n  timeout server 30m\n  timeout check 1s\n\
                 listen primary\n  bind 127.0.0.1:{port}\n  option httpchk GET /primary\n  http-check expect status 200\n\
                 \x20 default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions\n{servers}"
            ),
        )
        .unwrap();
        let mut cmd = Command::new("haproxy");
        cmd.arg("-db").arg("-f").arg(&config);
        log_to(&mut cmd, &self.dir.path().join("haproxy.log"));
        self.haproxy = Some(cmd.spawn().expect("haproxy on PATH (apt-get install haproxy)"));
        port
    }

    /// The member that leads now, by Patroni's `/primary`.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.patroni.is_some() && http_status(m.api_port, "/primary").await == 200 {
                return Some(i);
            }
        }
        None
    }

    /// Kills member `i` (Patroni and PostgreSQL, SIGKILL): its leader key
    /// lapses and the synchronous standby is promoted.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// The last lines of the members' logs, for a failure's message.
    fn logs(&self) -> String {
        (1..=self.members.len())
            .map(|n| {
                let text = std::fs::read_to_string(self.dir.path().join(format!("pg{n}.log"))).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(8).collect();
                format!("\npg{n}:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect()
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
        for child in [self.haproxy.take(), self.etcd.take()].into_iter().flatten() {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A three-node MariaDB Galera cluster (galera-4), no grant tables, a
/// database `xtimer`; state transfers by rsync.
pub struct Galera {
    /// Each node's `host:port`.
    pub hosts: Vec<String>,
    nodes: Vec<Option<Child>>,
    _dir: tempfile::TempDir,
}

impl Galera {
    /// Starts node 1 as a new cluster, then nodes 2 and 3 joining it; each
    /// waits until it reports `Synced`.
    pub async fn start() -> Self {
        let provider = "/usr/lib/galera/libgalera_smm.so";
        assert!(Path::new(provider).exists(), "galera-4 not found ({provider}): apt-get install galera-4");
        let dir = tempfile::Builder::new().prefix("xtimer-galera").tempdir().unwrap();
        Command::new("chmod").arg("755").arg(dir.path()).status().unwrap();
        let ports: Vec<[u16; 4]> = (0..3).map(|_| [free_port(), free_port(), free_port(), free_port()]).collect();
        let mut distinct: Vec<u16> = ports.iter().flatten().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 12, "twelve distinct ports: {ports:?}");
        let gcomm: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{}", p[1])).collect();
        let gcomm = format!("gcomm://{}", gcomm.join(","));
        let mariadbd = ["/usr/sbin/mariadbd", "/usr/sbin/mysqld"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("mariadbd (apt-get install mariadb-server)");
        let mut galera = Self { hosts: Vec::new(), nodes: Vec::new(), _dir: dir };
        for (n, [port, group, ist, sst]) in ports.iter().copied().enumerate() {
            let root = galera._dir.path();
            let data = root.join(format!("n{n}"));
            std::fs::create_dir(&data).unwrap();
            let mut install = Command::new("mariadb-install-db");
            install
                .arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let out = as_user(install, "mysql", &data).output().unwrap();
            assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
            let config = root.join(format!("n{n}.cnf"));
            std::fs::write(
                &config,
                format!(
                    "[mysqld]\ndatadir={data}\nport={port}\nbind-address=127.0.0.1\nsocket={data}/mysqld.sock\n\
                     pid-file={data}/mysqld.pid\nskip-grant-tables\nskip-name-resolve\nmax-connections=500\n\
                     binlog_format=ROW\ndefault_storage_engine=InnoDB\ninnodb_autoinc_lock_mode=2\n\
                     innodb_flush_log_at_trx_commit=0\ninnodb_buffer_pool_size=64M\nwsrep_on=ON\n\
                     wsrep_provider={provider}\nwsrep_cluster_name=xtimer-ha\nwsrep_cluster_address={gcomm}\n\
                     wsrep_node_name=n{n}\nwsrep_node_address=127.0.0.1:{group}\nwsrep_sst_method=rsync\n\
                     wsrep_sst_receive_address=127.0.0.1:{sst}\n\
                     wsrep_provider_options=\"gmcast.listen_addr=tcp://127.0.0.1:{group};ist.recv_addr=127.0.0.1:{ist}\"\n",
                    data = data.display(),
                ),
            )
            .unwrap();
            let mut cmd = Command::new(mariadbd);
            cmd.arg(format!("--defaults-file={}", config.display()));
            if n == 0 {
                cmd.arg("--wsrep-new-cluster");
            }
            log_to(&mut cmd, &root.join(format!("n{n}.log")));
            let child = as_user(cmd, "mysql", &data).spawn().unwrap();
            galera.nodes.push(Some(child));
            galera.hosts.push(format!("127.0.0.1:{port}"));
            let began = Instant::now();
            while !galera.sql(n, "SHOW STATUS LIKE 'wsrep_local_state_comment'").contains("Synced") {
                if began.elapsed() > Duration::from_secs(120) {
                    let log = std::fs::read_to_string(root.join(format!("n{n}.log"))).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(30).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    panic!("Galera node {n} not synced within 120 s:\n{}", tail.join("\n"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        galera.sql(0, "CREATE DATABASE IF NOT EXISTS xtimer");
        galera
    }

    /// Runs `statement` on node `n` with the `mariadb` client; its output
    /// (empty if it failed).
    pub fn sql(&self, n: usize, statement: &str) -> String {
        let port = self.hosts[n].rsplit(':').next().unwrap();
        let out = Command::new("mariadb")
            .args(["--protocol=tcp", "-h", "127.0.0.1", "-P", port, "-u", "root", "-N", "-B", "-e", statement])
            .stderr(Stdio::null())
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    }

    /// A `database.url` naming every node, node `first` first: a node of
    /// xtimer on it writes there while it answers.
    pub fn url_from(&self, first: usize) -> String {
        let hosts: Vec<&str> =
            (0..self.hosts.len()).map(|i| self.hosts[(first + i) % self.hosts.len()].as_str()).collect();
        format!("mysql://root@{}/xtimer", hosts.join(","))
    }

    /// Kills node `n` with SIGKILL: the others drop it from the cluster.
    pub fn kill(&mut self, n: usize) {
        if let Some(mut child) = self.nodes[n].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Galera {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            self.kill(n);
        }
    }
}
