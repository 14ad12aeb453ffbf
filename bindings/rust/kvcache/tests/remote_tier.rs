//! The remote tier through the safe API: its settings and errors, and a
//! real redis-server (started here on a loopback port, stopped at the end)
//! that one cache fills and a second cache reuses from. Skips, saying why,
//! without hiredis in the library or redis-server on the machine.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::tokens;
use kvcache::{features, Cache, Config, Dtype, SequenceOptions, Status, Tier};

/// A redis-server on a free loopback port, without persistence; killed and
/// its directory removed when dropped.
struct RedisServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl RedisServer {
    /// The server, or why there is none.
    fn start(name: &str) -> Result<RedisServer, String> {
        if !features().redis() {
            return Err("built without hiredis: install libhiredis-dev and rebuild".into());
        }
        let bin = std::env::var("KVC_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let dir = std::env::temp_dir().join(format!("kvc-rust-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {bin} (install redis-server): {e}"))?;
        let server = RedisServer { child, dir, port };
        // Bounded: 500 tries of PING, 10 ms apart at most.
        for _ in 0..500 {
            if server.ping() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err("redis-server did not answer PING within 5 s".into())
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok()
            && s.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(url: &str) -> Config {
    Config::builder()
        .num_layers(2)
        .kv_heads(2)
        .head_dim(8)
        .dtype(Dtype::F32)
        .tokens_per_block(4)
        .max_tokens(16)
        .partial_reuse(false)
        .remote_cache(url, "rust-test", 1 << 20)
        .remote_cache_timeouts(Duration::from_secs(2), Duration::from_secs(2))
        .build()
        .expect("config")
}

fn cache_prompt(cache: &Cache, id: u64, t: &[i32]) -> u64 {
    let cached = cache
        .add_sequence(id, t, &SequenceOptions::default())
        .unwrap();
    cache.commit(id, t.len() as u64).unwrap();
    cache.remove(id).unwrap();
    cached
}

#[test]
fn settings_round_trip_and_bad_values_are_refused() {
    let mut c = Config::new().unwrap();
    assert_eq!(c.remote_cache().unwrap(), (None, "kvc".to_string(), 0));
    assert_eq!(
        c.remote_cache_timeouts().unwrap(),
        (Duration::from_secs(1), Duration::from_secs(1))
    );
    assert!(!c.remote_cache_optional().unwrap());
    c.set_remote_cache(Some("redis://:pw@10.0.0.7:6380/1"), Some("team-a"), 4096)
        .unwrap();
    assert_eq!(
        c.remote_cache().unwrap(),
        (
            Some("redis://:pw@10.0.0.7:6380/1".to_string()),
            "team-a".to_string(),
            4096
        )
    );
    c.set_remote_cache_timeouts(Duration::from_millis(50), Duration::from_millis(20))
        .unwrap();
    assert_eq!(
        c.remote_cache_timeouts().unwrap(),
        (Duration::from_millis(50), Duration::from_millis(20))
    );
    c.set_remote_cache_optional(true).unwrap();
    assert!(c.remote_cache_optional().unwrap());

    let e = c
        .set_remote_cache(Some("redis://h:70000/0"), None, 1)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(
        e.message.contains("the port 70000 is not in 1..65535"),
        "{}",
        e.message
    );
    let e = c
        .set_remote_cache(Some("redis://h/0"), Some("no spaces"), 1)
        .unwrap_err();
    assert!(e.message.contains("may hold only letters"), "{}", e.message);
    let e = c
        .set_remote_cache_timeouts(Duration::ZERO, Duration::from_secs(1))
        .unwrap_err();
    assert!(
        e.message
            .contains("connect_ms must be in 1..600000 ms, got 0"),
        "{}",
        e.message
    );
    let e = c
        .set_remote_cache(Some("redis://h\0/0"), None, 1)
        .unwrap_err();
    assert!(e.message.contains("NUL"), "{}", e.message);
    // Unchanged by the failures.
    assert_eq!(c.remote_cache().unwrap().2, 4096);
    c.set_remote_cache(None, None, 0).unwrap();
    assert_eq!(c.remote_cache().unwrap().0, None);
}

#[test]
fn a_second_cache_reuses_what_the_first_offloaded_to_redis() {
    let server = match RedisServer::start("reuse") {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let a = tokens(100, 13); // 3 full blocks + 1 token
    {
        let first = Cache::new(&config(&server.url())).unwrap();
        assert_eq!(cache_prompt(&first, 1, &a), 0);
        assert_eq!(cache_prompt(&first, 2, &tokens(500, 16)), 0); // a to Redis
        first.flush_tiers().unwrap();
        let s = first.tier_stats(Tier::Remote).unwrap();
        assert_eq!(s.tier, Tier::Remote);
        assert_eq!((s.offered_blocks, s.stored_blocks), (7, 7));
        assert_eq!((s.dropped_blocks, s.errors), (0, 0));
        assert_eq!(s.capacity_bytes, 1 << 20);
    }
    let second = Cache::new(&config(&server.url())).unwrap();
    assert_eq!(cache_prompt(&second, 1, &a), 12);
    let s = second.tier_stats(Tier::Remote).unwrap();
    assert_eq!((s.onboarded_blocks, s.hits, s.rejected), (3, 3, 0));
    second.check().unwrap();

    // Nothing listening: refused at create unless optional.
    let port = server.port;
    drop(server);
    let url = format!("redis://127.0.0.1:{port}/0");
    let e = Cache::new(&config(&url)).unwrap_err();
    assert_eq!(e.status, Status::Device);
    assert!(
        e.message.contains("cannot connect within 2000 ms"),
        "{}",
        e.message
    );
    let mut optional = config(&url);
    optional.set_remote_cache_optional(true).unwrap();
    let cache = Cache::new(&optional).unwrap();
    assert!(cache.tier_stats(Tier::Remote).unwrap().errors >= 1);
}
