//! HTTP basic authentication against the bcrypt hashes of `basic_auth_users`, and the request
//! rate limit of `rate_limit`.
//!
//! bcrypt is slow on purpose (about 50-100 ms at cost 10), so outcomes are cached by (user,
//! hash, password) as the toolkit does: Prometheus sends the same credentials every scrape, and
//! a scrape should not cost a hash. An unknown user is checked against a fixed hash anyway, so
//! the time taken does not tell which user names exist. Only one bcrypt runs at a time: a flood
//! of wrong passwords costs one core, not all of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;

/// Most outcomes kept; the cache is emptied when full (a flood of guesses must not grow it).
const CACHE_MAX: usize = 100;

/// bcrypt (cost 10) of a password nobody is given, checked for unknown users so that they take
/// as long as known ones.
const DECOY_HASH: &str = "$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy";

/// Checks credentials; shared by every connection.
#[derive(Default)]
pub struct BasicAuth {
    cache: Mutex<HashMap<(String, String, String), bool>>,
    bcrypt: Mutex<()>,
}

/// The user and password of an `Authorization: Basic ...` header value.
pub fn credentials(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

impl BasicAuth {
    /// True when `authorization` (the header's value) names a user of `users` with the right
    /// password.
    pub fn allows(&self, users: &BTreeMap<String, String>, authorization: Option<&[u8]>) -> bool {
        let Some((user, password)) = authorization.and_then(credentials) else {
            return false;
        };
        let (known, hash) = match users.get(&user) {
            Some(h) => (true, h.as_str()),
            None => (false, DECOY_HASH),
        };
        let key = (user, hash.to_string(), password);
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied();
        let ok = match cached {
            Some(ok) => ok,
            None => {
                let ok = {
                    let _one_at_a_time = self.bcrypt.lock().unwrap_or_else(|p| p.into_inner());
                    // A hash that does not parse was refused when the file was loaded.
                    bcrypt::verify(&key.2, hash).unwrap_or(false)
                };
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= CACHE_MAX {
                    cache.clear();
                }
                cache.insert(key, ok);
                ok
            }
        };
        ok && known
    }
}

/// A token bucket: `burst` requests at once, then one per `interval`.
pub struct RateLimiter {
    interval: Duration,
    burst: u32,
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    pub fn new(interval: Duration, burst: u32) -> RateLimiter {
        RateLimiter {
            interval,
            burst,
            tokens: f64::from(burst),
            last: Instant::now(),
        }
    }

    /// Whether this limiter was made for these settings (a reload keeps a bucket that did not
    /// change).
    pub fn is(&self, interval: Duration, burst: u32) -> bool {
        self.interval == interval && self.burst == burst
    }

    /// Takes a token if there is one.
    pub fn allow(&mut self, now: Instant) -> bool {
        let earned =
            now.saturating_duration_since(self.last).as_secs_f64() / self.interval.as_secs_f64();
        self.tokens = (self.tokens + earned).min(f64::from(self.burst));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> Vec<u8> {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {token}").into_bytes()
    }

    #[test]
    fn credentials_are_decoded_and_other_schemes_refused() {
        assert_eq!(
            credentials(&header("prom", "a:b")),
            Some(("prom".into(), "a:b".into()))
        );
        assert_eq!(credentials(b"Bearer abc"), None);
        assert_eq!(credentials(b"Basic !!!"), None);
        assert_eq!(credentials(b"basic cHJvbQ=="), None); // "prom", no colon
    }

    #[test]
    fn right_password_passes_and_the_outcome_is_cached() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let users = BTreeMap::from([("prom".to_string(), hash)]);
        let auth = BasicAuth::default();
        assert!(auth.allows(&users, Some(&header("prom", "s3cret"))));
        assert!(auth.allows(&users, Some(&header("prom", "s3cret"))));
        assert!(!auth.allows(&users, Some(&header("prom", "wrong"))));
        assert!(!auth.allows(&users, Some(&header("eve", "s3cret"))));
        assert!(!auth.allows(&users, None));
        assert_eq!(auth.cache.lock().unwrap().len(), 3);
        // The decoy hash is a real bcrypt hash (so unknown users cost as much as known ones).
        assert!(DECOY_HASH.parse::<bcrypt::HashParts>().is_ok());
        assert_eq!(
            DECOY_HASH.parse::<bcrypt::HashParts>().unwrap().get_cost(),
            10
        );
    }

    #[test]
    fn the_bucket_allows_a_burst_then_one_per_interval() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(Duration::from_secs(1), 2);
        assert!(r.allow(t0));
        assert!(r.allow(t0));
        assert!(!r.allow(t0));
        assert!(!r.allow(t0 + Duration::from_millis(500)));
        assert!(r.allow(t0 + Duration::from_millis(1001)));
    }
}
