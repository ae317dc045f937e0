//! This crate's error (opening a URI), and how object_store's errors become
//! [`StorageError`]s that say what to check or set.

use crate::config::Scheme;
use tdb_storage::StorageError;
use thiserror::Error;

/// Why a URI could not be opened as storage.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Not a URI or path tdb can open.
    #[error("{uri}: not a URI tdb can open ({reason})")]
    InvalidUri {
        /// The URI.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A scheme no backend serves.
    #[error("{uri}: no backend for {scheme}:// (s3, az, abfs, abfss, gs, http, https, file or a plain path)")]
    UnsupportedScheme {
        /// The URI.
        uri: String,
        /// Its scheme.
        scheme: String,
    },
    /// A configuration pair that is malformed or names no setting.
    #[error("config {key}={value}: {reason}")]
    Config {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// No credentials were found for a store that needs them.
    #[error("{uri}: no credentials; set {what}")]
    MissingCredentials {
        /// The URI.
        uri: String,
        /// The variables or config keys to set.
        what: &'static str,
    },
    /// object_store refused the configuration.
    #[error("{uri}: cannot configure the client")]
    Build {
        /// The URI.
        uri: String,
        /// object_store's error.
        #[source]
        source: object_store::Error,
    },
}

/// The names a user sets for each store, for error messages.
struct Names {
    credentials: &'static str,
    endpoint: &'static str,
    container: &'static str,
}

fn names(scheme: Scheme) -> Names {
    match scheme {
        Scheme::S3 => Names {
            credentials: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or vfs.s3.aws_access_key_id and vfs.s3.aws_secret_access_key); AWS_SKIP_SIGNATURE=true for a public bucket; AWS_METADATA_ENDPOINT for an instance profile",
            endpoint: "AWS_ENDPOINT_URL (or vfs.s3.endpoint_override with vfs.s3.scheme)",
            container: "bucket",
        },
        Scheme::Azure => Names {
            credentials: "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_KEY (or vfs.azure.storage_account_name with vfs.azure.storage_account_key or vfs.azure.storage_sas_token); AZURE_STORAGE_USE_EMULATOR=true for Azurite",
            endpoint: "AZURE_STORAGE_ENDPOINT (or vfs.azure.blob_endpoint), or AZURE_STORAGE_USE_EMULATOR=true",
            container: "container",
        },
        Scheme::Gcs => Names {
            credentials: "GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS (or vfs.gcs.service_account_key); GOOGLE_SKIP_SIGNATURE=true for a public bucket",
            endpoint: "the network route to storage.googleapis.com",
            container: "bucket",
        },
        Scheme::Http => Names {
            credentials: "credentials the server accepts",
            endpoint: "the URL",
            container: "server path",
        },
    }
}

/// What to set for credentials of a store: one text for the error before
/// any request (none found) and after one (refused).
pub(crate) fn credentials(scheme: Scheme) -> &'static str {
    names(scheme).credentials
}

/// The whole chain of an error's messages, for classifying it.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// What stores answer when the bucket or container itself is missing.
const NO_CONTAINER: [&str; 3] = ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"];

/// What a failed request most likely means, and what to set about it.
fn hint(scheme: Scheme, text: &str) -> Option<String> {
    let n = names(scheme);
    let has = |needles: &[&str]| needles.iter().any(|w| text.contains(w));
    if has(&NO_CONTAINER) {
        return Some(format!(
            "the {} does not exist: create it or correct the URI",
            n.container
        ));
    }
    if has(&[
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "AuthenticationFailed",
        "AuthorizationFailure",
        "403 Forbidden",
        "401 Unauthorized",
        "status: 403",
        "status: 401",
    ]) {
        return Some(format!(
            "access denied: check the credentials ({})",
            n.credentials
        ));
    }
    if has(&[
        "error sending request",
        "Connection refused",
        "connection refused",
        "dns error",
        "timed out",
        "tcp connect error",
    ]) {
        return Some(format!(
            "the endpoint does not answer: check {} and the network",
            n.endpoint
        ));
    }
    None
}

/// object_store's error on `key` (whose URI is `uri`) as a storage error.
pub(crate) fn storage_error(
    scheme: Scheme,
    uri: &str,
    key: &str,
    e: object_store::Error,
) -> StorageError {
    let text = chain(&e);
    if let Some(message) = hint(scheme, &text) {
        return StorageError::Backend {
            uri: uri.to_owned(),
            message,
            source: Some(Box::new(e)),
        };
    }
    match e {
        object_store::Error::NotFound { .. } => StorageError::not_found(key),
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            StorageError::AlreadyExists {
                path: key.to_owned(),
            }
        }
        other => StorageError::Backend {
            uri: uri.to_owned(),
            message: "request failed".to_owned(),
            source: Some(Box::new(other)),
        },
    }
}

/// Whether object_store's error means the object is not there (and not
/// that its bucket is missing, which must fail loudly).
pub(crate) fn is_missing(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::NotFound { .. }) && {
        let text = chain(e);
        !NO_CONTAINER.iter().any(|w| text.contains(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_what_to_set() {
        let h = hint(Scheme::S3, "Error performing GET: NoSuchBucket").unwrap();
        assert!(h.contains("bucket does not exist"), "{h}");
        let h = hint(
            Scheme::S3,
            "Client error with status 403 Forbidden: InvalidAccessKeyId",
        )
        .unwrap();
        assert!(h.contains("AWS_ACCESS_KEY_ID"), "{h}");
        let h = hint(
            Scheme::Azure,
            "error sending request: tcp connect error: Connection refused",
        )
        .unwrap();
        assert!(h.contains("AZURE_STORAGE_ENDPOINT"), "{h}");
        assert_eq!(hint(Scheme::S3, "Internal Error"), None);
    }
}
