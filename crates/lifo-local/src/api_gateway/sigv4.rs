//! API Gateway's IAM authorization (`AWS_IAM`), as the HttpApi of
//! template.yaml has it on every route: a request must carry a SigV4
//! signature for the service `execute-api`, made with a key API Gateway
//! knows, within five minutes of its `X-Amz-Date`. API Gateway answers
//! anything else with 403 and `{"message": …}`, before the function runs.
//!
//! [`IamAuthorizer::verify`] checks a request as API Gateway does: it
//! parses the `Authorization` header, checks the credential scope and the
//! clock, then signs the request again with the key's secret (the
//! `aws-sigv4` crate, the SDK's own signer, with the settings `execute-api`
//! takes: the path normalized and encoded twice, the body hashed) over
//! exactly the headers the caller signed, and compares the signatures.
//! [`sign`] is the caller's side, for the tests and local clients.
//!
//! The messages are those AWS documents for SigV4 failures (IAM User
//! Guide, "Troubleshoot signature errors"; API Gateway's "troubleshoot 403
//! Forbidden"). An unsigned request to an IAM route of an HTTP API gets
//! `{"message":"Forbidden"}` (REST APIs say "Missing Authentication
//! Token").

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use axum::http::{HeaderMap, Method, Uri};
use chrono::{DateTime, NaiveDateTime, Utc};
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The service a signature for API Gateway names.
pub const SERVICE: &str = "execute-api";
/// How far a request's `X-Amz-Date` may be from API Gateway's clock
/// (IAM User Guide: "a request must reach AWS within five minutes of the
/// time stamp in the request").
pub const CLOCK_WINDOW: Duration = Duration::from_secs(5 * 60);
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const AMZ_DATE: &str = "%Y%m%dT%H%M%SZ";

/// Who signed a request that passed: what API Gateway puts under
/// `requestContext.authorizer.iam`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub access_key: String,
    pub user_arn: String,
}

/// The keys API Gateway knows, and the region the API is in.
#[derive(Debug, Clone)]
pub struct IamAuthorizer {
    region: String,
    keys: HashMap<String, (Credentials, String)>,
}

impl IamAuthorizer {
    /// An API in `region` that knows no key yet.
    pub fn new(region: &str) -> Self {
        Self {
            region: region.to_owned(),
            keys: HashMap::new(),
        }
    }

    /// The local stack's API: the local stack's own credentials
    /// ([`crate::aws::credentials`]) in its region.
    pub fn local() -> Self {
        Self::new(crate::aws::REGION).with_key(crate::aws::credentials(), "local")
    }

    /// Knows `credentials` too, as the IAM user `user`.
    pub fn with_key(mut self, credentials: Credentials, user: &str) -> Self {
        let arn = format!("arn:aws:iam::{}:user/{user}", crate::aws::ACCOUNT);
        self.keys
            .insert(credentials.access_key_id().to_owned(), (credentials, arn));
        self
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The caller, if API Gateway would let this request through; else the
    /// message of its 403.
    pub fn verify(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Caller, String> {
        let (auth, signed_at, credentials, user_arn) = self.check_headers(headers, now)?;
        let expected = signature(
            method,
            uri,
            headers,
            &auth.signed_headers,
            body,
            credentials,
            &self.region,
            SystemTime::from(signed_at),
        )
        .ok_or_else(mismatch)?;
        if expected != auth.signature {
            return Err(mismatch());
        }
        Ok(Caller {
            access_key: auth.access_key,
            user_arn: user_arn.clone(),
        })
    }

    /// What [`IamAuthorizer::verify`] checks before the signature itself,
    /// which needs the body: a well-formed `Authorization`, the credential
    /// scope, the clock, a known key and its session token. The caller it
    /// names, if these hold.
    pub fn verify_headers(&self, headers: &HeaderMap, now: SystemTime) -> Result<Caller, String> {
        let (auth, _, _, user_arn) = self.check_headers(headers, now)?;
        Ok(Caller {
            access_key: auth.access_key,
            user_arn: user_arn.clone(),
        })
    }

    #[allow(clippy::type_complexity)]
    fn check_headers(
        &self,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Result<(Authorization, DateTime<Utc>, &Credentials, &String), String> {
        let Some(authorization) = headers.get(axum::http::header::AUTHORIZATION) else {
            return Err("Forbidden".to_owned());
        };
        let auth = Authorization::parse(authorization.to_str().unwrap_or(""))?;
        let date = headers
            .get("x-amz-date")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' \
                 header."
                    .to_owned()
            })?;
        let signed_at = NaiveDateTime::parse_from_str(date, AMZ_DATE)
            .map_err(|_| format!("X-Amz-Date {date:?} is not in the form YYYYMMDD'T'HHMMSS'Z'"))?
            .and_utc();
        auth.check_scope(&self.region, signed_at)?;
        check_clock(signed_at, now)?;
        let invalid_token = || "The security token included in the request is invalid.".to_owned();
        let (credentials, user_arn) = self.keys.get(&auth.access_key).ok_or_else(invalid_token)?;
        let token = headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok());
        if token != credentials.session_token() {
            return Err(invalid_token());
        }
        if !auth.signed_headers.iter().any(|h| h == "host") {
            return Err(
                "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
                    .to_owned(),
            );
        }
        Ok((auth, signed_at, credentials, user_arn))
    }
}

fn mismatch() -> String {
    "The request signature we calculated does not match the signature you provided. Check your \
     AWS Secret Access Key and signing method. Consult the service documentation for details."
        .to_owned()
}

/// `X-Amz-Date` within [`CLOCK_WINDOW`] of `now`, either way.
fn check_clock(signed_at: DateTime<Utc>, now: SystemTime) -> Result<(), String> {
    let now = DateTime::<Utc>::from(now);
    let window = chrono::Duration::from_std(CLOCK_WINDOW).unwrap_or_default();
    let fmt = |t: DateTime<Utc>| t.format(AMZ_DATE).to_string();
    if signed_at < now - window {
        return Err(format!(
            "Signature expired: {} is now earlier than {} ({} - 5 min.)",
            fmt(signed_at),
            fmt(now - window),
            fmt(now)
        ));
    }
    if signed_at > now + window {
        return Err(format!(
            "Signature not yet current: {} is still later than {} ({} + 5 min.)",
            fmt(signed_at),
            fmt(now + window),
            fmt(now)
        ));
    }
    Ok(())
}

/// The parts of `Authorization: AWS4-HMAC-SHA256 Credential=…,
/// SignedHeaders=…, Signature=…`.
#[derive(Debug)]
struct Authorization {
    access_key: String,
    /// `yyyymmdd/region/service/aws4_request`, split.
    scope: Vec<String>,
    signed_headers: Vec<String>,
    signature: String,
}

impl Authorization {
    fn parse(header: &str) -> Result<Self, String> {
        let Some(rest) = header.strip_prefix(ALGORITHM) else {
            return Err(format!(
                "Authorization header requires the algorithm {ALGORITHM} (found {:?})",
                header.split_whitespace().next().unwrap_or("")
            ));
        };
        let mut parts: HashMap<&str, &str> = HashMap::new();
        for part in rest.split(',') {
            if let Some((k, v)) = part.trim().split_once('=') {
                parts.insert(k.trim(), v.trim());
            }
        }
        let missing: Vec<String> = ["Credential", "Signature", "SignedHeaders"]
            .iter()
            .filter(|k| parts.get(*k).is_none_or(|v| v.is_empty()))
            .map(|k| format!("Authorization header requires '{k}' parameter."))
            .collect();
        if !missing.is_empty() {
            return Err(missing.join(" "));
        }
        let credential = parts["Credential"];
        let mut fields = credential.split('/');
        let access_key = fields.next().unwrap_or("").to_owned();
        let scope: Vec<String> = fields.map(str::to_owned).collect();
        if access_key.is_empty() || scope.len() != 4 || scope[3] != "aws4_request" {
            return Err(format!(
                "Credential should be KEY/yyyymmdd/region/{SERVICE}/aws4_request, not {credential:?}"
            ));
        }
        Ok(Self {
            access_key,
            scope,
            signed_headers: parts["SignedHeaders"]
                .split(';')
                .map(str::to_ascii_lowercase)
                .collect(),
            signature: parts["Signature"].to_owned(),
        })
    }

    fn check_scope(&self, region: &str, signed_at: DateTime<Utc>) -> Result<(), String> {
        let (day, scope_region, service) = (&self.scope[0], &self.scope[1], &self.scope[2]);
        if service != SERVICE {
            return Err(format!(
                "Credential should be scoped to correct service: '{SERVICE}'."
            ));
        }
        if scope_region != region {
            return Err(format!(
                "Credential should be scoped to a valid Region, not '{scope_region}'."
            ));
        }
        let from_date = signed_at.format("%Y%m%d").to_string();
        if *day != from_date {
            return Err(format!(
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date \
                 from HTTP: '{day}' != '{from_date}', from '{}'.",
                signed_at.format(AMZ_DATE)
            ));
        }
        Ok(())
    }
}

/// The signature of a request over `signed` headers, at `time`, as SigV4
/// for `execute-api` computes it; `None` if a signed header is absent or
/// not text.
#[allow(clippy::too_many_arguments)]
fn signature(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    signed: &[String],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Option<String> {
    // The signer adds x-amz-date (from `time`) and the session token itself.
    let derived = ["x-amz-date", "x-amz-security-token"];
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for name in signed.iter().filter(|n| !derived.contains(&n.as_str())) {
        let mut values = headers.get_all(name.as_str()).iter().peekable();
        values.peek()?;
        for v in values {
            pairs.push((name.as_str(), v.to_str().ok()?));
        }
    }
    let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = SignableRequest::new(
        method.as_str(),
        path_and_query,
        pairs.into_iter(),
        SignableBody::Bytes(body),
    )
    .ok()?;
    let mut settings = SigningSettings::default();
    // Exactly what the caller signed: nothing left out by default.
    settings.excluded_headers = Some(Vec::new());
    let (_, signature) = sign_with(request, credentials, region, time, settings).ok()?;
    Some(signature)
}

/// `request` signed for `execute-api` by `credentials`: the headers to add
/// and the signature.
fn sign_with(
    request: SignableRequest<'_>,
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
    settings: SigningSettings,
) -> anyhow::Result<(aws_sigv4::http_request::SigningInstructions, String)> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(settings)
        .build()?
        .into();
    Ok(aws_sigv4::http_request::sign(request, &params)?.into_parts())
}

/// The headers that sign a request to `url` (absolute, `http://host:port/…`)
/// with `credentials` in `region` at `time`, as an SDK or `curl
/// --aws-sigv4` would: `authorization`, `x-amz-date`, and
/// `x-amz-security-token` for temporary credentials. `headers` are the
/// request's other headers (all signed).
pub fn sign(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> anyhow::Result<Vec<(String, String)>> {
    let request = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )?;
    let (instructions, _) = sign_with(
        request,
        credentials,
        region,
        time,
        SigningSettings::default(),
    )?;
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:8080/tasks/sp%20ace?limit=2&cursor=x";

    fn signed_request(
        method: &str,
        url: &str,
        body: &[u8],
        credentials: &Credentials,
        time: SystemTime,
    ) -> (Method, Uri, HeaderMap) {
        let extra = [("content-type", "application/json")];
        let signing = sign(
            method,
            url,
            &extra,
            body,
            credentials,
            crate::aws::REGION,
            time,
        )
        .unwrap();
        let uri: Uri = url.parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("host", uri.authority().unwrap().as_str().parse().unwrap());
        headers.insert("content-type", "application/json".parse().unwrap());
        for (k, v) in signing {
            headers.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let origin: Uri = uri.path_and_query().unwrap().as_str().parse().unwrap();
        (method.parse().unwrap(), origin, headers)
    }

    #[test]
    fn a_request_signed_with_a_known_key_passes_and_names_its_caller() {
        let iam = IamAuthorizer::local();
        let now = SystemTime::now();
        let (m, u, h) = signed_request("POST", URL, b"{\"a\":1}", &crate::aws::credentials(), now);
        let caller = iam.verify(&m, &u, &h, b"{\"a\":1}", now).unwrap();
        assert_eq!(caller.access_key, "local");
        assert_eq!(caller.user_arn, "arn:aws:iam::000000000000:user/local");
    }

    #[test]
    fn every_change_to_a_signed_request_is_refused_as_api_gateway_refuses_it() {
        let iam = IamAuthorizer::local();
        let now = SystemTime::now();
        let creds = crate::aws::credentials();
        let body = b"{\"a\":1}";
        let (m, u, h) = signed_request("POST", URL, body, &creds, now);
        let refuse = |m: &Method, u: &Uri, h: &HeaderMap, b: &[u8], at: SystemTime| {
            iam.verify(m, u, h, b, at).unwrap_err()
        };
        assert!(refuse(&m, &u, &h, b"{\"a\":2}", now).starts_with("The request signature"));
        assert!(refuse(&Method::PUT, &u, &h, body, now).starts_with("The request signature"));
        let other: Uri = "/tasks/sp%20ace?limit=3&cursor=x".parse().unwrap();
        assert!(refuse(&m, &other, &h, body, now).starts_with("The request signature"));
        let mut h2 = h.clone();
        h2.insert("content-type", "text/plain".parse().unwrap());
        assert!(refuse(&m, &u, &h2, body, now).starts_with("The request signature"));
        let mut h3 = h.clone();
        h3.remove("authorization");
        assert_eq!(refuse(&m, &u, &h3, body, now), "Forbidden");
        let late = now + Duration::from_secs(301);
        assert!(refuse(&m, &u, &h, body, late).starts_with("Signature expired: "));
        let early = now - Duration::from_secs(301);
        assert!(refuse(&m, &u, &h, body, early).starts_with("Signature not yet current: "));
        // Within the window either way, it passes.
        iam.verify(&m, &u, &h, body, now + Duration::from_secs(299))
            .unwrap();

        let stranger = Credentials::new("AKIDSTRANGER", "secret", None, None, "test");
        let (m, u, h) = signed_request("POST", URL, body, &stranger, now);
        assert_eq!(
            refuse(&m, &u, &h, body, now),
            "The security token included in the request is invalid."
        );
        let wrong_secret = Credentials::new("local", "not-local", None, None, "test");
        let (m, u, h) = signed_request("POST", URL, body, &wrong_secret, now);
        assert!(refuse(&m, &u, &h, body, now).starts_with("The request signature"));
    }

    #[test]
    fn a_signature_for_another_region_or_service_or_day_is_refused_by_its_scope() {
        let iam = IamAuthorizer::local();
        let now = SystemTime::now();
        let (m, u, h) = signed_request("GET", URL, b"", &crate::aws::credentials(), now);
        let auth = h["authorization"].to_str().unwrap().to_owned();
        let with = |from: &str, to: &str| {
            let mut h = h.clone();
            h.insert("authorization", auth.replace(from, to).parse().unwrap());
            iam.verify(&m, &u, &h, b"", now).unwrap_err()
        };
        assert_eq!(
            with("/us-east-1/", "/eu-west-1/"),
            "Credential should be scoped to a valid Region, not 'eu-west-1'."
        );
        assert_eq!(
            with("/execute-api/", "/lambda/"),
            "Credential should be scoped to correct service: 'execute-api'."
        );
        let day = DateTime::<Utc>::from(now).format("%Y%m%d").to_string();
        assert!(
            with(&format!("/{day}/"), "/19990101/").starts_with("Date in Credential scope"),
            "scope day"
        );
        assert_eq!(
            with("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1"),
            "Authorization header requires the algorithm AWS4-HMAC-SHA256 (found \"AWS4-HMAC-SHA1\")"
        );
        let bare = {
            let mut h = h.clone();
            h.insert(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=local/x".parse().unwrap(),
            );
            iam.verify(&m, &u, &h, b"", now).unwrap_err()
        };
        assert_eq!(
            bare,
            "Authorization header requires 'Signature' parameter. Authorization header requires \
             'SignedHeaders' parameter."
        );
    }

    #[test]
    fn the_path_is_signed_as_sent_so_a_decoded_path_no_longer_matches() {
        // API Gateway checks the signature over the path the client sent,
        // before it decodes it for the function.
        let iam = IamAuthorizer::local();
        let now = SystemTime::now();
        let url = "http://127.0.0.1:8080/tasks/~YS9i/history";
        let (m, u, h) = signed_request("GET", url, b"", &crate::aws::credentials(), now);
        iam.verify(&m, &u, &h, b"", now).unwrap();
        let decoded: Uri = "/tasks/a/b/history".parse().unwrap();
        assert!(iam.verify(&m, &decoded, &h, b"", now).is_err());
    }
}
