//! The HTTP reward against the reference server and against servers that hang, die, fail or
//! answer garbage.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{HttpReward, HttpRewardConfig};
use crate::reward::{FailureKind, ImageSample, Reward};

fn images(n: usize) -> Vec<ImageSample<String>> {
    let mut rng = drift_core::rng::SplitMix64::new(7);
    (0..n)
        .map(|i| {
            let rgb = (0..32 * 32 * 3).map(|_| (rng.next_u64() % 256) as u8).collect();
            ImageSample::new(format!("prompt {i}"), 32, 32, rgb).unwrap()
        })
        .collect()
}

fn reward(url: &str, timeout_s: f64, retries: u32) -> HttpReward {
    HttpReward::new(HttpRewardConfig {
        url: url.into(),
        timeout_s,
        retries,
        backoff_s: 0.0,
        ..HttpRewardConfig::default()
    })
    .unwrap()
}

/// The reference server, started on a free port; killed on drop.
struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn reference_server() -> Server {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/reward_server/server.py");
    let mut child = Command::new("python3")
        .args([script, "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the reference server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").expect("the server says where").to_string();
    Server(child, url)
}

/// Mean brightness in [0, 1], the reference server's demo score, and its channel means.
fn brightness(s: &ImageSample<String>) -> (f64, [f64; 3]) {
    let mut sums = [0.0; 3];
    for (i, &v) in s.rgb.iter().enumerate() {
        sums[i % 3] += f64::from(v);
    }
    let n = 255.0 * (s.width * s.height) as f64;
    let ch = sums.map(|x| x / n);
    ((ch[0] + ch[1] + ch[2]) / 3.0, ch)
}

#[test]
fn a_batch_round_trips_through_the_reference_server() {
    let server = reference_server();
    let r = HttpReward::new(HttpRewardConfig {
        url: server.1.clone(),
        batch_size: 40,
        ..HttpRewardConfig::default()
    })
    .unwrap();
    let batch = images(64);
    let out = r.evaluate_batch(&batch);
    assert_eq!(out.len(), 64);
    for (o, s) in out.iter().zip(&batch) {
        assert!(o.is_ok(), "{:?}", o.failure);
        let (mean, ch) = brightness(s);
        assert!((o.score - mean).abs() < 1e-12, "{} vs {mean}", o.score);
        let red = o.details.components.iter().find(|c| c.name == "red").unwrap();
        assert!((red.score - ch[0]).abs() < 1e-12);
    }
    // One image alone goes through `evaluate`.
    let one = r.evaluate(&batch[3]).unwrap();
    assert!((one.score - brightness(&batch[3]).0).abs() < 1e-12);
}

/// What a scripted test server does with each connection, in turn.
#[derive(Clone)]
enum Act {
    Hang,
    Close,
    Reply(u16, &'static str),
}

/// A loopback server acting out `acts` (the last one repeats); returns its URL and a counter
/// of the requests it received.
fn scripted_server(acts: Vec<Act>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/score", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let i = seen.fetch_add(1, Ordering::SeqCst);
            let act = acts[i.min(acts.len() - 1)].clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 1 << 16];
                let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
                let _ = stream.read(&mut buf);
                match act {
                    Act::Hang => std::thread::sleep(Duration::from_secs(30)),
                    Act::Close => drop(stream),
                    Act::Reply(code, body) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 {code} X\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            });
        }
    });
    (url, count)
}

#[test]
fn a_hanging_server_becomes_timed_out_failures_after_its_retries() {
    let (url, count) = scripted_server(vec![Act::Hang]);
    let t0 = std::time::Instant::now();
    let out = reward(&url, 0.3, 1).evaluate_batch(&images(3));
    assert!(t0.elapsed() < Duration::from_secs(10), "the call must not wait for the server");
    assert_eq!(out.len(), 3);
    for o in &out {
        let f = o.failure.as_ref().expect("a failure");
        assert_eq!(f.kind, FailureKind::Timeout);
        assert!(f.message.contains(&url) && f.message.contains("after 2 tries"), "{}", f.message);
        assert_eq!(o.score, 0.0);
    }
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn dead_failing_and_garbage_answers_are_recorded_and_5xx_is_retried() {
    // Closed without an answer, then a 503, then a good answer: retried to success.
    let good = r#"{"scores": [0.25, 0.5], "components": {"c": [1, 2]}}"#;
    let (url, count) =
        scripted_server(vec![Act::Close, Act::Reply(503, "busy"), Act::Reply(200, good)]);
    let out = reward(&url, 5.0, 2).evaluate_batch(&images(2));
    assert_eq!(out.iter().map(|o| o.score).collect::<Vec<_>>(), vec![0.25, 0.5]);
    assert_eq!(out[1].details.components[0].score, 2.0);
    assert_eq!(count.load(Ordering::SeqCst), 3);

    let cases: [(&str, Act, &str); 5] = [
        ("garbage", Act::Reply(200, "hello"), "not {\"scores\""),
        ("too few", Act::Reply(200, r#"{"scores": [1.0]}"#), "1 scores for 2 images"),
        ("client error", Act::Reply(400, "bad request"), "HTTP status 400: bad request"),
        ("dead", Act::Close, "not an HTTP answer"),
        (
            "bad component",
            Act::Reply(200, r#"{"scores": [1, 2], "components": {"c": [1]}}"#),
            "component `c`",
        ),
    ];
    for (what, act, expected) in cases {
        let (url, count) = scripted_server(vec![act]);
        let out = reward(&url, 5.0, 0).evaluate_batch(&images(2));
        for o in &out {
            let f = o.failure.as_ref().unwrap_or_else(|| panic!("{what}: no failure"));
            assert_eq!(f.kind, FailureKind::Error, "{what}");
            assert!(f.message.contains(expected), "{what}: {}", f.message);
        }
        assert_eq!(count.load(Ordering::SeqCst), 1, "{what}: no retry without retries");
    }

    // A null score fails its image alone, with the server's reason.
    let (url, _) = scripted_server(vec![Act::Reply(
        200,
        r#"{"scores": [0.5, null], "errors": [null, "blurry"]}"#,
    )]);
    let out = reward(&url, 5.0, 0).evaluate_batch(&images(2));
    assert!(out[0].is_ok() && out[0].score == 0.5);
    assert!(out[1].failure.as_ref().unwrap().message.contains("blurry"));

    // Nobody listening: connection refused, recorded.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = reward(&format!("http://127.0.0.1:{port}/"), 2.0, 0).evaluate_batch(&images(1));
    assert!(
        out[0].failure.as_ref().unwrap().message.contains("connect to"),
        "{:?}",
        out[0].failure
    );
}

#[test]
fn bad_configurations_name_the_field() {
    let make = |cfg: HttpRewardConfig| HttpReward::new(cfg).unwrap_err().to_string();
    let base =
        HttpRewardConfig { url: "http://127.0.0.1:1/".into(), ..HttpRewardConfig::default() };
    assert!(make(HttpRewardConfig::default()).contains("http.url"));
    assert!(make(HttpRewardConfig { url: "https://x/".into(), ..base.clone() }).contains("https"));
    assert!(make(HttpRewardConfig { timeout_s: 0.0, ..base.clone() }).contains("http.timeout_s"));
    assert!(make(HttpRewardConfig { batch_size: 0, ..base.clone() }).contains("http.batch_size"));
    assert!(make(HttpRewardConfig { backoff_s: -1.0, ..base }).contains("http.backoff_s"));
}
