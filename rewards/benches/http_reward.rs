//! The HTTP reward's round trip on loopback: a batch of 64 32×32 images to the reference
//! server (`examples/reward_server/server.py`, Python standard library only), PNG-encoded,
//! scored and answered. One JSON line on stdout; skipped when python3 is missing.
//!
//! Run: `cargo bench -p drift-rewards --bench http_reward`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use drift_rewards::http::{HttpReward, HttpRewardConfig};
use drift_rewards::reward::{ImageSample, Reward};

const IMAGES: usize = 64;
const REPEATS: usize = 10;

fn main() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/reward_server/server.py");
    let child =
        Command::new("python3").args([script, "--port", "0"]).stdout(Stdio::piped()).spawn();
    let Ok(mut child) = child else {
        println!("{}", serde_json::json!({"bench": "http_reward", "skipped": "no python3"}));
        return;
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().trim_start_matches("listening on ").to_string();
    let reward = HttpReward::new(HttpRewardConfig { url, ..HttpRewardConfig::default() }).unwrap();
    let mut rng = drift_core::rng::SplitMix64::new(1);
    // Noise (the PNG encoder stores it unfiltered) and smooth gradients (filtered rows, which
    // the server's pure-Python decoder undoes byte by byte).
    let noise: Vec<Vec<u8>> = (0..IMAGES)
        .map(|_| (0..32 * 32 * 3).map(|_| (rng.next_u64() % 256) as u8).collect())
        .collect();
    let gradients: Vec<Vec<u8>> = (0..IMAGES)
        .map(|i| (0..32 * 32 * 3).map(|j| ((j / 3 % 32) * 4 + (j / 96) * 2 + i) as u8).collect())
        .collect();
    for (kind, pixels) in [("noise", noise), ("gradients", gradients)] {
        let batch: Vec<ImageSample<String>> = pixels
            .into_iter()
            .enumerate()
            .map(|(i, rgb)| ImageSample::new(format!("a red circle {i}"), 32, 32, rgb).unwrap())
            .collect();
        let mut times = Vec::new();
        for _ in 0..REPEATS {
            let t0 = Instant::now();
            let out = reward.evaluate_batch(&batch);
            times.push(t0.elapsed().as_secs_f64());
            assert!(out.iter().all(|o| o.is_ok()), "{:?}", out[0].failure);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{}",
            serde_json::json!({
                "bench": "http_reward", "images": IMAGES, "size": "32x32", "pixels": kind,
                "repeats": REPEATS, "best_s": times[0], "median_s": times[REPEATS / 2],
                "worst_s": times[REPEATS - 1],
            })
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
