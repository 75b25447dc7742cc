//! [`HttpReward`]: images scored by a service over HTTP, one request per batch.

use std::time::{Duration, Instant};

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::client::{post_json, CallError, HttpUrl};
use crate::image::{encode_png, Image};
use crate::reward::{
    Component, Details, Evaluation, FailureKind, FailurePolicy, ImageSample, Outcome, Reward,
};
use crate::worlds::shapes::Prompt;
use crate::RewardError;

/// Where the scoring service is and how it is called. Serialized as the `http` table of a
/// reward term: `{ url = "http://127.0.0.1:18085/score", timeout_s = 60 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpRewardConfig {
    /// The service's address, `http://host[:port][/path]`. Required: the default (empty) is
    /// refused by [`HttpReward::new`].
    pub url: String,
    /// The reward's name in metrics and details (`reward/<name>`). Default `"http"`.
    pub name: String,
    /// Seconds one request may take, connecting, sending and answering together. Default 60.
    pub timeout_s: f64,
    /// Further tries of a request that timed out, lost its connection or got a 5xx status
    /// (never of a 4xx or of a malformed answer). Default 2.
    pub retries: u32,
    /// Seconds before the first retry, doubled before each next one. Default 0.5.
    pub backoff_s: f64,
    /// Images per request; a larger batch is sent in several. Default 64.
    pub batch_size: usize,
}

impl Default for HttpRewardConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            name: "http".into(),
            timeout_s: 60.0,
            retries: 2,
            backoff_s: 0.5,
            batch_size: 64,
        }
    }
}

/// The text of a sample's prompt, as the service receives it.
pub trait PromptText {
    /// The prompt as text.
    fn prompt_text(&self) -> String;
}

impl PromptText for String {
    fn prompt_text(&self) -> String {
        self.clone()
    }
}

impl PromptText for Prompt {
    fn prompt_text(&self) -> String {
        self.to_text()
    }
}

/// A reward computed by an HTTP scoring service (a PickScore, HPS, aesthetic, OCR or GenEval
/// model served from Python, as flow_grpo's users run them).
///
/// Protocol (`examples/reward_server/server.py` is a working server):
/// - request: `POST` of `{"prompts": [text, …], "images": [base64 PNG, …]}`, one entry per
///   image, 8-bit RGB;
/// - answer (status 200): `{"scores": [number or null, …]}` with one entry per image, and
///   optionally `"components": {name: [number, …], …}` (reported per image as the details'
///   components, weight 1) and `"errors": [text or null, …]` (why an image's score is null).
///
/// Nothing the service does stops a run: a refused or broken connection, a time-out, a non-200
/// status or an answer that is not that JSON makes every image of the request a recorded
/// [`crate::Failure`] naming the address and the cause, scored by the failure policy (0); a
/// null or non-finite score fails its image alone. Requests that time out, lose their
/// connection or get a 5xx are retried (`retries`, exponential back-off).
#[derive(Debug, Clone)]
pub struct HttpReward {
    cfg: HttpRewardConfig,
    url: HttpUrl,
    policy: FailurePolicy,
}

impl HttpReward {
    /// A client of the service at `cfg.url`; errors name the field at fault.
    pub fn new(cfg: HttpRewardConfig) -> Result<Self, RewardError> {
        let bad = |field, value: String, expected: &str| RewardError::Config {
            field,
            value,
            expected: expected.into(),
        };
        let url = HttpUrl::parse(&cfg.url)
            .map_err(|m| bad("http.url", m, "http://host[:port][/path]"))?;
        if !(cfg.timeout_s.is_finite() && cfg.timeout_s > 0.0) {
            return Err(bad("http.timeout_s", cfg.timeout_s.to_string(), "finite and > 0"));
        }
        if !(cfg.backoff_s.is_finite() && cfg.backoff_s >= 0.0) {
            return Err(bad("http.backoff_s", cfg.backoff_s.to_string(), "finite and >= 0"));
        }
        if cfg.batch_size == 0 {
            return Err(bad("http.batch_size", "0".into(), "at least 1"));
        }
        if cfg.name.is_empty() {
            return Err(bad("http.name", "\"\"".into(), "a non-empty name"));
        }
        Ok(Self { cfg, url, policy: FailurePolicy::default() })
    }

    /// The configuration.
    pub fn config(&self) -> &HttpRewardConfig {
        &self.cfg
    }

    /// Scores one request's worth of samples.
    fn score_chunk<P: PromptText>(&self, samples: &[ImageSample<P>]) -> Vec<Outcome> {
        let start = Instant::now();
        let fail_all = |kind, message: String| {
            let elapsed = start.elapsed();
            samples.iter().map(|_| self.policy.fail(kind, message.clone(), elapsed)).collect()
        };
        let body = match request_body(samples) {
            Ok(b) => b,
            Err(e) => return fail_all(FailureKind::Error, e.to_string()),
        };
        let answer = match self.call_with_retries(&body) {
            Ok(a) => a,
            Err(CallError::Timeout(m)) => {
                return fail_all(FailureKind::Timeout, format!("{}: {m}", self.cfg.url))
            }
            Err(e) => return fail_all(FailureKind::Error, format!("{}: {e}", self.cfg.url)),
        };
        match parse_answer(&answer, samples.len()) {
            Ok(per_image) => {
                let elapsed = start.elapsed();
                per_image
                    .into_iter()
                    .map(|r| match r {
                        Ok(details_score) => Outcome {
                            score: details_score.0,
                            details: details_score.1,
                            failure: None,
                            elapsed,
                        },
                        Err(m) => self.policy.fail(
                            FailureKind::Error,
                            format!("{}: {m}", self.cfg.url),
                            elapsed,
                        ),
                    })
                    .collect()
            }
            Err(m) => fail_all(FailureKind::Error, format!("{}: {m}", self.cfg.url)),
        }
    }

    fn call_with_retries(&self, body: &[u8]) -> Result<Vec<u8>, CallError> {
        let timeout = Duration::from_secs_f64(self.cfg.timeout_s);
        let mut wait = self.cfg.backoff_s;
        let mut tries = 0;
        loop {
            match post_json(&self.url, body, timeout) {
                Ok(b) => return Ok(b),
                Err(e) => {
                    let transient = match &e {
                        CallError::Timeout(_) | CallError::Transport(_) => true,
                        CallError::Status(code, _) => *code >= 500,
                    };
                    if !transient || tries >= self.cfg.retries {
                        let after = if tries > 0 {
                            format!(" (after {} tries)", tries + 1)
                        } else {
                            String::new()
                        };
                        return Err(match e {
                            CallError::Timeout(m) => CallError::Timeout(format!("{m}{after}")),
                            CallError::Transport(m) => CallError::Transport(format!("{m}{after}")),
                            CallError::Status(c, m) => CallError::Status(c, format!("{m}{after}")),
                        });
                    }
                    tries += 1;
                    std::thread::sleep(Duration::from_secs_f64(wait));
                    wait *= 2.0;
                }
            }
        }
    }
}

/// The JSON request for `samples`.
fn request_body<P: PromptText>(samples: &[ImageSample<P>]) -> Result<Vec<u8>, RewardError> {
    let mut images = Vec::with_capacity(samples.len());
    for s in samples {
        let image = Image::from_raw(s.width, s.height, s.rgb.clone())?;
        images.push(base64::engine::general_purpose::STANDARD.encode(encode_png(&image)?));
    }
    let prompts: Vec<String> = samples.iter().map(|s| s.prompt.prompt_text()).collect();
    let body = serde_json::json!({ "prompts": prompts, "images": images });
    Ok(serde_json::to_vec(&body).expect("a JSON value serializes"))
}

/// What the service said about each of `n` images: its score and details, or why it has none.
type PerImage = Vec<Result<(f64, Details), String>>;

/// Parses an answer for `n` images (the protocol of [`HttpReward`]).
fn parse_answer(body: &[u8], n: usize) -> Result<PerImage, String> {
    #[derive(Deserialize)]
    struct Answer {
        scores: Vec<Option<f64>>,
        #[serde(default)]
        components: std::collections::BTreeMap<String, Vec<f64>>,
        #[serde(default)]
        errors: Option<Vec<Option<String>>>,
    }
    let head = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    let a: Answer = serde_json::from_slice(body).map_err(|e| {
        format!("the answer is not {{\"scores\": [...]}} JSON ({e}); it began {head:?}")
    })?;
    if a.scores.len() != n {
        return Err(format!("{} scores for {n} images", a.scores.len()));
    }
    for (name, values) in &a.components {
        if values.len() != n {
            return Err(format!("component `{name}` has {} values for {n} images", values.len()));
        }
    }
    if let Some(errors) = &a.errors {
        if errors.len() != n {
            return Err(format!("{} errors for {n} images", errors.len()));
        }
    }
    Ok((0..n)
        .map(|i| {
            let reason = a.errors.as_ref().and_then(|e| e[i].clone());
            match a.scores[i] {
                Some(s) if s.is_finite() => {
                    let components = a
                        .components
                        .iter()
                        .map(|(name, v)| Component {
                            name: name.clone(),
                            weight: 1.0,
                            score: v[i],
                            failure: None,
                        })
                        .collect();
                    Ok((s, Details { components, ..Details::default() }))
                }
                Some(s) => Err(format!("image {i}: non-finite score {s}")),
                None => Err(format!(
                    "image {i}: no score ({})",
                    reason.unwrap_or_else(|| "no reason given".into())
                )),
            }
        })
        .collect())
}

impl<P: PromptText + Send + Sync> Reward<ImageSample<P>> for HttpReward {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn evaluate(&self, sample: &ImageSample<P>) -> Result<Evaluation, RewardError> {
        let out = self.score_chunk(std::slice::from_ref(sample)).remove(0);
        match out.failure {
            None => Ok(Evaluation { score: out.score, details: out.details }),
            Some(f) => Err(RewardError::Invalid {
                what: f.message,
                expected: "a score from the reward service".into(),
            }),
        }
    }

    /// One request per `batch_size` images.
    fn evaluate_batch(&self, samples: &[ImageSample<P>]) -> Vec<Outcome> {
        samples.chunks(self.cfg.batch_size).flat_map(|c| self.score_chunk(c)).collect()
    }
}
