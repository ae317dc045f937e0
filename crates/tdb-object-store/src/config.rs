//! URIs and settings: which store a URI names, and how TileDB's config
//! names and object_store's own keys configure it.

use crate::error::{credentials, OpenError};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreScheme, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// The remote stores a URI can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `s3://`, `s3a://` and S3 endpoints over https.
    S3,
    /// `az://`, `abfs://`, `abfss://`, `azure://` and Azure endpoints over https.
    Azure,
    /// `gs://`.
    Gcs,
    /// Any other `http://` or `https://` server: read-only.
    Http,
}

/// How reads and uploads are shaped for a store where each request costs
/// milliseconds. TileDB's config names set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Ranges of one file at most this far apart are fetched as one request
    /// (`vfs.min_batch_gap`, TileDB's default 500 KB).
    pub coalesce_gap: u64,
    /// Ranges of one file are also fetched as one request, whatever the
    /// gaps between them, while it stays within this many bytes (and
    /// `max_request`): `vfs.min_batch_size`, TileDB's rule and default
    /// (20 MiB). Fewer requests (which stores bill and throttle) for more
    /// bytes; 0 fetches scattered tiles as smaller requests side by side
    /// instead.
    pub min_batch: u64,
    /// A coalesced request grows to at most this many bytes
    /// (`vfs.max_batch_size`): a large batch goes as several requests at
    /// once, which a store serves side by side, rather than as one long
    /// stream.
    pub max_request: u64,
    /// Requests in flight at once (`vfs.s3.max_parallel_ops`).
    pub concurrency: usize,
    /// Uploads go in parts of this many bytes, at least S3's minimum of
    /// 5 MiB (`vfs.s3.multipart_part_size`).
    pub part_size: usize,
}

/// S3's smallest part of a multipart upload but the last.
pub const MIN_PART_SIZE: usize = 5 << 20;

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            coalesce_gap: 500 << 10,
            min_batch: 20 << 20,
            max_request: 8 << 20,
            concurrency: 16,
            part_size: MIN_PART_SIZE,
        }
    }
}

/// Settings for opening a URI: `key=value` pairs, either TileDB's config
/// names (`vfs.s3.endpoint_override`, `vfs.s3.aws_access_key_id`,
/// `vfs.azure.storage_account_name`, ...) so TileDB users reuse theirs, or
/// object_store's own keys (`aws_endpoint`, `azure_storage_account_key`,
/// ...). The environment variables object_store reads (`AWS_*`, `AZURE_*`,
/// `GOOGLE_*`) apply first; pairs here override them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pairs: Vec<(String, String)>,
}

impl Config {
    /// No settings beyond the environment.
    pub fn new() -> Self {
        Config::default()
    }

    /// Adds one setting.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pairs.push((key.into(), value.into()));
        self
    }

    /// Adds one `key=value` setting as a command line gives it.
    pub fn parse_pair(self, pair: &str) -> Result<Self, OpenError> {
        match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok(self.set(k.trim(), v.trim())),
            _ => Err(OpenError::Config {
                key: pair.to_owned(),
                value: String::new(),
                reason: "expected key=value".to_owned(),
            }),
        }
    }

    /// The settings, in the order given.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Config {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        pairs
            .into_iter()
            .fold(Config::new(), |c, (k, v)| c.set(k, v))
    }
}

/// What a URI resolved to: a store, the prefix inside it, and how to use it.
pub(crate) struct Resolved {
    pub scheme: Scheme,
    pub store: Arc<dyn ObjectStore>,
    pub root: object_store::path::Path,
    pub tuning: Tuning,
}

/// Settings sorted for one store: object_store keys, client and retry
/// settings, tuning.
#[derive(Default)]
struct Settings {
    keys: Vec<(String, String)>,
    retry: RetryConfig,
    tuning: Tuning,
    /// TileDB's `vfs.s3.scheme`, applied to an endpoint override without one.
    s3_scheme: Option<String>,
    s3_endpoint: Option<String>,
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> OpenError {
    OpenError::Config {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, OpenError> {
    value
        .parse()
        .map_err(|_| bad(key, value, "expected a non-negative whole number"))
}

/// Bounded retries by default: TileDB users report retries that never end.
fn default_retry() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(60),
        ..RetryConfig::default()
    }
}

impl Settings {
    fn new() -> Self {
        Settings {
            retry: default_retry(),
            ..Settings::default()
        }
    }

    /// Sorts one pair: TileDB's names are translated, tdb's tuning taken,
    /// other TileDB settings (most of TileDB's config is about its own
    /// engine) ignored, and anything else kept as an object_store key.
    fn take(&mut self, key: &str, value: &str) -> Result<(), OpenError> {
        let ms =
            |v: &str| -> Result<String, OpenError> { Ok(format!("{}ms", number::<u64>(key, v)?)) };
        let mapped: Option<(&str, String)> = match key {
            "vfs.s3.endpoint_override" => {
                self.s3_endpoint = Some(value.to_owned());
                None
            }
            "vfs.s3.scheme" => {
                self.s3_scheme = Some(value.to_owned());
                (value == "http").then(|| ("allow_http", "true".to_owned()))
            }
            "vfs.s3.region" => Some(("aws_region", value.to_owned())),
            "vfs.s3.aws_access_key_id" => Some(("aws_access_key_id", value.to_owned())),
            "vfs.s3.aws_secret_access_key" => Some(("aws_secret_access_key", value.to_owned())),
            "vfs.s3.aws_session_token" => Some(("aws_session_token", value.to_owned())),
            "vfs.s3.use_virtual_addressing" => {
                Some(("aws_virtual_hosted_style_request", value.to_owned()))
            }
            "vfs.s3.no_sign_request" => Some(("aws_skip_signature", value.to_owned())),
            "vfs.s3.connect_timeout_ms" | "vfs.azure.connect_timeout_ms" => {
                Some(("connect_timeout", ms(value)?))
            }
            "vfs.s3.request_timeout_ms" | "vfs.azure.request_timeout_ms" => {
                Some(("timeout", ms(value)?))
            }
            "vfs.s3.connect_max_tries" | "vfs.azure.max_retries" | "vfs.gcs.max_retries" => {
                self.retry.max_retries = number(key, value)?;
                None
            }
            "vfs.azure.storage_account_name" => {
                Some(("azure_storage_account_name", value.to_owned()))
            }
            "vfs.azure.storage_account_key" => {
                Some(("azure_storage_account_key", value.to_owned()))
            }
            "vfs.azure.storage_sas_token" => Some(("azure_storage_sas_key", value.to_owned())),
            "vfs.azure.blob_endpoint" => {
                if value.starts_with("http://") {
                    self.keys.push(("allow_http".to_owned(), "true".to_owned()));
                }
                Some(("azure_storage_endpoint", value.to_owned()))
            }
            "vfs.gcs.service_account_key" => Some(("google_service_account_key", value.to_owned())),
            "vfs.min_batch_gap" => {
                self.tuning.coalesce_gap = number(key, value)?;
                None
            }
            "vfs.min_batch_size" => {
                self.tuning.min_batch = number(key, value)?;
                None
            }
            "vfs.max_batch_size" => {
                self.tuning.max_request = number(key, value)?;
                None
            }
            "vfs.s3.max_parallel_ops"
            | "vfs.azure.max_parallel_ops"
            | "vfs.gcs.max_parallel_ops" => {
                let n: usize = number(key, value)?;
                if n == 0 {
                    return Err(bad(key, value, "must be at least 1"));
                }
                self.tuning.concurrency = n;
                None
            }
            "vfs.s3.multipart_part_size"
            | "vfs.azure.block_list_block_size"
            | "vfs.gcs.multi_part_size" => {
                let n: usize = number(key, value)?;
                if n < MIN_PART_SIZE {
                    return Err(bad(key, value, "parts must be at least 5 MiB (5242880)"));
                }
                self.tuning.part_size = n;
                None
            }
            k if k.starts_with("vfs.") || k.starts_with("sm.") || k.starts_with("rest.") => None,
            k => Some((k, value.to_owned())),
        };
        if let Some((k, v)) = mapped {
            self.keys.push((k.to_owned(), v));
        }
        Ok(())
    }

    /// The S3 endpoint as object_store takes it: TileDB's override is a
    /// host and port, its scheme a separate setting (https by default).
    fn endpoint(&self) -> Option<String> {
        let e = self.s3_endpoint.as_ref()?;
        Some(if e.contains("://") {
            e.clone()
        } else {
            format!("{}://{e}", self.s3_scheme.as_deref().unwrap_or("https"))
        })
    }
}

/// Applies `keys` to a builder through its own key parser; a key no store
/// of this kind knows is an error (a typo must not pass silently).
fn apply<B, K: std::str::FromStr>(
    mut builder: B,
    keys: &[(String, String)],
    with: impl Fn(B, K, String) -> B,
) -> Result<B, OpenError> {
    for (k, v) in keys {
        let key = k
            .to_ascii_lowercase()
            .parse::<K>()
            .map_err(|_| bad(k, v, "not a setting of this store"))?;
        builder = with(builder, key, v.clone());
    }
    Ok(builder)
}

fn is_true(v: Option<String>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Resolves a remote URI (not `file://` or a plain path) with `config`.
pub(crate) fn resolve(uri: &str, config: &Config) -> Result<Resolved, OpenError> {
    let url = url::Url::parse(uri).map_err(|e| OpenError::InvalidUri {
        uri: uri.to_owned(),
        reason: e.to_string(),
    })?;
    let (kind, path) = ObjectStoreScheme::parse(&url).map_err(|e| match url.scheme() {
        "s3" | "s3a" | "az" | "abfs" | "abfss" | "azure" | "gs" | "http" | "https" => {
            OpenError::InvalidUri {
                uri: uri.to_owned(),
                reason: e.to_string(),
            }
        }
        s => OpenError::UnsupportedScheme {
            uri: uri.to_owned(),
            scheme: s.to_owned(),
        },
    })?;
    let root = object_store::path::Path::parse(path).map_err(|e| OpenError::InvalidUri {
        uri: uri.to_owned(),
        reason: e.to_string(),
    })?;
    let mut s = Settings::new();
    for (k, v) in config.pairs() {
        s.take(k, v)?;
    }
    let build = |source| OpenError::Build {
        uri: uri.to_owned(),
        source,
    };
    let missing = |what| OpenError::MissingCredentials {
        uri: uri.to_owned(),
        what,
    };
    let (scheme, store): (Scheme, Arc<dyn ObjectStore>) = match kind {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env().with_url(uri);
            if let Some(e) = s.endpoint() {
                b = b.with_config(AmazonS3ConfigKey::Endpoint, e);
            }
            let b = apply(b, &s.keys, |b, k, v| b.with_config(k, v))?;
            // Without keys object_store would ask the EC2 instance metadata
            // service and hang until it times out where there is none:
            // instance profiles are taken only when asked for.
            use AmazonS3ConfigKey as K;
            let has = |k: K| b.get_config_value(&k).is_some();
            if !(has(K::AccessKeyId)
                || is_true(b.get_config_value(&K::SkipSignature))
                || has(K::WebIdentityTokenFile)
                || has(K::ContainerCredentialsRelativeUri)
                || has(K::ContainerCredentialsFullUri)
                || has(K::MetadataEndpoint))
            {
                return Err(missing(credentials(Scheme::S3)));
            }
            let store = b.with_retry(s.retry.clone()).build().map_err(build)?;
            (Scheme::S3, Arc::new(store))
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let b = MicrosoftAzureBuilder::from_env().with_url(uri);
            let b = apply(b, &s.keys, |b, k, v| b.with_config(k, v))?;
            use AzureConfigKey as K;
            let has = |k: K| b.get_config_value(&k).is_some();
            if !(has(K::AccessKey)
                || has(K::SasKey)
                || has(K::Token)
                || has(K::ClientSecret)
                || has(K::FederatedTokenFile)
                || has(K::MsiEndpoint)
                || is_true(b.get_config_value(&K::UseEmulator))
                || is_true(b.get_config_value(&K::SkipSignature)))
            {
                return Err(missing(credentials(Scheme::Azure)));
            }
            let store = b.with_retry(s.retry.clone()).build().map_err(build)?;
            (Scheme::Azure, Arc::new(store))
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let b = GoogleCloudStorageBuilder::from_env().with_url(uri);
            let b = apply(b, &s.keys, |b, k, v| b.with_config(k, v))?;
            use GoogleConfigKey as K;
            let has = |k: K| b.get_config_value(&k).is_some();
            if !(has(K::ServiceAccount)
                || has(K::ServiceAccountKey)
                || has(K::ApplicationCredentials)
                || is_true(b.get_config_value(&K::SkipSignature)))
            {
                return Err(missing(credentials(Scheme::Gcs)));
            }
            let store = b.with_retry(s.retry.clone()).build().map_err(build)?;
            (Scheme::Gcs, Arc::new(store))
        }
        ObjectStoreScheme::Http => {
            let base = &url[..url::Position::BeforePath];
            let b = HttpBuilder::new().with_url(base);
            let b = apply(b, &s.keys, |b, k: ClientConfigKey, v| b.with_config(k, v))?;
            let store = b.with_retry(s.retry.clone()).build().map_err(build)?;
            (Scheme::Http, Arc::new(store))
        }
        // Local paths and `file://` are `LocalStorage`'s (`crate::open`).
        _ => {
            return Err(OpenError::UnsupportedScheme {
                uri: uri.to_owned(),
                scheme: url.scheme().to_owned(),
            })
        }
    };
    Ok(Resolved {
        scheme,
        store,
        root,
        tuning: s.tuning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiledb_names_translate() {
        let mut s = Settings::new();
        for (k, v) in [
            ("vfs.s3.endpoint_override", "localhost:9999"),
            ("vfs.s3.scheme", "http"),
            ("vfs.s3.region", "eu-west-1"),
            ("vfs.s3.use_virtual_addressing", "false"),
            ("vfs.s3.connect_max_tries", "3"),
            ("vfs.min_batch_gap", "1000"),
            ("vfs.min_batch_size", "20971520"),
            ("vfs.s3.max_parallel_ops", "4"),
            ("sm.tile_cache_size", "0"),
        ] {
            s.take(k, v).unwrap();
        }
        assert_eq!(s.endpoint().as_deref(), Some("http://localhost:9999"));
        assert_eq!(s.retry.max_retries, 3);
        assert_eq!(s.tuning.coalesce_gap, 1000);
        assert_eq!(s.tuning.min_batch, 20 << 20);
        assert_eq!(s.tuning.concurrency, 4);
        assert_eq!(
            s.keys,
            [
                ("allow_http".to_owned(), "true".to_owned()),
                ("aws_region".to_owned(), "eu-west-1".to_owned()),
                (
                    "aws_virtual_hosted_style_request".to_owned(),
                    "false".to_owned()
                ),
            ]
        );
        assert!(s.take("vfs.s3.multipart_part_size", "1024").is_err());
        assert!(s.take("vfs.s3.max_parallel_ops", "0").is_err());
        assert!(s.take("vfs.min_batch_gap", "-1").is_err());
    }

    #[test]
    fn uris_name_their_store() {
        let c = Config::new()
            .set("aws_access_key_id", "k")
            .set("aws_secret_access_key", "s")
            .set("aws_endpoint", "http://127.0.0.1:1")
            .set("allow_http", "true");
        let r = resolve("s3://bucket/some/array", &c).unwrap();
        assert_eq!((r.scheme, r.root.as_ref()), (Scheme::S3, "some/array"));
        let r = resolve(
            "az://container/a",
            &Config::new().set("azure_storage_use_emulator", "true"),
        )
        .unwrap();
        assert_eq!((r.scheme, r.root.as_ref()), (Scheme::Azure, "a"));
        let r = resolve(
            "gs://bucket/g/h",
            &Config::new().set("google_skip_signature", "true"),
        )
        .unwrap();
        assert_eq!((r.scheme, r.root.as_ref()), (Scheme::Gcs, "g/h"));
        let r = resolve("http://127.0.0.1:1/x/y", &Config::new()).unwrap();
        assert_eq!((r.scheme, r.root.as_ref()), (Scheme::Http, "x/y"));
        assert!(matches!(
            resolve("ftp://host/x", &Config::new()),
            Err(OpenError::UnsupportedScheme { .. })
        ));
        assert!(matches!(
            resolve("s3://bucket/x", &c.clone().set("no_such_key", "1")),
            Err(OpenError::Config { .. })
        ));
    }

    #[test]
    fn missing_credentials_say_what_to_set() {
        // Only when the environment gives none either.
        if std::env::vars().any(|(k, _)| k.starts_with("AWS_") || k.starts_with("GOOGLE_")) {
            return;
        }
        let e = resolve("s3://bucket/x", &Config::new()).err().unwrap();
        assert!(e.to_string().contains("AWS_ACCESS_KEY_ID"), "{e}");
        let e = resolve("gs://bucket/x", &Config::new()).err().unwrap();
        assert!(e.to_string().contains("GOOGLE_SERVICE_ACCOUNT"), "{e}");
    }
}
