//! The cloud APIs at the wire: Bedrock's binary event stream decoded with the AWS SDK's own
//! frame decoder, its SigV4 check against signatures made by AWS's signer (`aws-sigv4`),
//! Google's token endpoint with a JWT signed here, and the credentials each endpoint demands.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_types::event_stream::{HeaderValue, Message};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use tau_mock_llm::{
    Api, AwsCredentials, Fault, GoogleOAuth, MockServer, Reply, StopReason, TEST_RSA_KEY_PEM,
};

use crate::support::{client, post, request};

const KEY_ID: &str = "AKIDMOCKWIRE";
const SECRET: &str = "wire/secret/key";

/// Signs a Bedrock request with AWS's signer, at `time`, with `secret`.
fn signed(url: &str, body: &[u8], secret: &str, time: SystemTime) -> Vec<(String, String)> {
    let identity: Identity = Credentials::new(KEY_ID, secret, None, None, "test").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-west-2")
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let headers = [("content-type", "application/json")];
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    instructions
        .headers()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .chain([("content-type".to_owned(), "application/json".to_owned())])
        .collect()
}

async fn bedrock_call(
    server: &MockServer,
    body: &Value,
    headers: Vec<(String, String)>,
    sent_body: Option<&[u8]>,
) -> reqwest::Response {
    let (path, _) = request(Api::BedrockConverseStream, "x");
    let mut builder = client().post(format!("{}{path}", server.url()));
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    let text = body.to_string();
    builder
        .body(sent_body.map_or_else(|| text.into_bytes(), <[u8]>::to_vec))
        .send()
        .await
        .unwrap()
}

fn bedrock_url(server: &MockServer) -> String {
    let (path, _) = request(Api::BedrockConverseStream, "x");
    format!("{}{path}", server.url())
}

/// The body's event-stream messages, decoded as the AWS SDKs decode them.
fn frames(bytes: &[u8]) -> Vec<Message> {
    let mut decoder = MessageFrameDecoder::new();
    let mut buffer = bytes::Bytes::copy_from_slice(bytes);
    let mut out = Vec::new();
    while let DecodedFrame::Complete(message) = decoder.decode_frame(&mut buffer).unwrap() {
        out.push(message);
    }
    assert!(buffer.is_empty(), "trailing bytes");
    out
}

fn header(message: &Message, name: &str) -> String {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str().to_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

fn payload(message: &Message) -> Value {
    serde_json::from_slice(message.payload()).unwrap()
}

fn aws_server_credentials() -> AwsCredentials {
    AwsCredentials {
        access_key_id: KEY_ID.into(),
        secret_access_key: SECRET.into(),
        session_token: None,
    }
}

#[tokio::test]
async fn bedrock_streams_converse_events_in_event_stream_frames() {
    let server = MockServer::start().await.unwrap();
    server.require_aws_signature(aws_server_credentials());
    server.push(
        Reply::new()
            .thinking_signed("plan", "c2ln")
            .with_text("Hello there")
            .tool_call("tooluse_1", "bash", json!({"command": "ls"}))
            .usage(12, 34, 56, 7),
    );
    let (_, body) = request(Api::BedrockConverseStream, "x");
    let bytes = body.to_string().into_bytes();
    let headers = signed(&bedrock_url(&server), &bytes, SECRET, SystemTime::now());
    let response = bedrock_call(&server, &body, headers, None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.amazon.eventstream"
    );
    assert!(response.headers().contains_key("x-amzn-requestid"));
    let messages = frames(&response.bytes().await.unwrap());
    let kinds: Vec<String> = messages.iter().map(|m| header(m, ":event-type")).collect();
    assert_eq!(kinds.first().map(String::as_str), Some("messageStart"));
    assert_eq!(&kinds[kinds.len() - 2..], ["messageStop", "metadata"]);
    for message in &messages {
        assert_eq!(header(message, ":message-type"), "event");
        assert_eq!(header(message, ":content-type"), "application/json");
        assert!(
            payload(message)["p"].is_string(),
            "Bedrock pads every payload"
        );
    }
    let deltas: Vec<Value> = messages
        .iter()
        .filter(|m| header(m, ":event-type") == "contentBlockDelta")
        .map(|m| payload(m)["delta"].clone())
        .collect();
    let text: String = deltas.iter().filter_map(|d| d["text"].as_str()).collect();
    assert_eq!(text, "Hello there");
    assert!(deltas.contains(&json!({"reasoningContent": {"signature": "c2ln"}})));
    let input: String = deltas
        .iter()
        .filter_map(|d| d["toolUse"]["input"].as_str())
        .collect();
    assert_eq!(input, r#"{"command":"ls"}"#);
    let start = messages
        .iter()
        .find(|m| header(m, ":event-type") == "contentBlockStart")
        .map(payload)
        .unwrap();
    assert_eq!(
        start["start"]["toolUse"],
        json!({"toolUseId": "tooluse_1", "name": "bash"})
    );
    let stop = payload(&messages[messages.len() - 2]);
    assert_eq!(stop["stopReason"], "tool_use");
    let usage = &payload(&messages[messages.len() - 1])["usage"];
    assert_eq!(
        (
            &usage["inputTokens"],
            &usage["outputTokens"],
            &usage["cacheReadInputTokens"],
            &usage["cacheWriteInputTokens"],
            &usage["totalTokens"]
        ),
        (&json!(12), &json!(34), &json!(56), &json!(7), &json!(109))
    );
    let recorded = &server.requests()[0];
    assert_eq!(recorded.api, Api::BedrockConverseStream);

    // Lengths stop at max_tokens.
    server.push(Reply::text("a").stop_reason(StopReason::Length));
    let headers = signed(&bedrock_url(&server), &bytes, SECRET, SystemTime::now());
    let messages = frames(
        &bedrock_call(&server, &body, headers, None)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    assert_eq!(
        payload(&messages[messages.len() - 2])["stopReason"],
        "max_tokens"
    );
}

#[tokio::test]
async fn bedrock_checks_signatures_as_aws_does() {
    let server = MockServer::start().await.unwrap();
    server.require_aws_signature(aws_server_credentials());
    let (_, body) = request(Api::BedrockConverseStream, "x");
    let bytes = body.to_string().into_bytes();
    let url = bedrock_url(&server);
    let refusal = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let kind = response.headers()["x-amzn-errortype"]
            .to_str()
            .unwrap()
            .to_owned();
        let message = response.json::<Value>().await.unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned();
        (status, kind, message)
    };

    let wrong_secret = signed(&url, &bytes, "not-it", SystemTime::now());
    let (status, kind, message) =
        refusal(bedrock_call(&server, &body, wrong_secret, None).await).await;
    assert_eq!((status, kind.as_str()), (403, "InvalidSignatureException"));
    assert!(message.starts_with("The request signature we calculated does not match"));

    // The body is covered: a changed body fails the same signature.
    let good = signed(&url, &bytes, SECRET, SystemTime::now());
    let (_, kind, _) = refusal(bedrock_call(&server, &body, good.clone(), Some(b"{}")).await).await;
    assert_eq!(kind, "InvalidSignatureException");

    let stale = signed(
        &url,
        &bytes,
        SECRET,
        SystemTime::now() - Duration::from_secs(20 * 60),
    );
    let (_, _, message) = refusal(bedrock_call(&server, &body, stale, None).await).await;
    assert!(message.starts_with("Signature expired"), "{message}");

    let (status, kind, _) = refusal(bedrock_call(&server, &body, Vec::new(), None).await).await;
    assert_eq!(
        (status, kind.as_str()),
        (403, "MissingAuthenticationTokenException")
    );
    assert_eq!(server.remaining(), 0);

    // A good signature gets the scripted reply.
    server.push(Reply::text("signed"));
    let response = bedrock_call(&server, &body, good.clone(), None).await;
    assert_eq!(response.status(), 200);

    // Temporary keys need their session token, signed.
    server.require_aws_signature(AwsCredentials {
        session_token: Some("session-1".into()),
        ..aws_server_credentials()
    });
    let (status, kind, _) = refusal(bedrock_call(&server, &body, good, None).await).await;
    assert_eq!(
        (status, kind.as_str()),
        (403, "UnrecognizedClientException")
    );
}

#[tokio::test]
async fn bedrock_faults_carry_aws_exception_names() {
    let server = MockServer::start().await.unwrap();
    let (_, body) = request(Api::BedrockConverseStream, "x");
    let bearer = vec![("authorization".to_owned(), "Bearer k".to_owned())];
    for (fault, status, kind, message) in [
        (
            Fault::RateLimited { retry_after: None },
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        (
            Fault::ContextOverflow,
            400,
            "ValidationException",
            "Input is too long for requested model.",
        ),
        (
            Fault::ServiceUnavailable,
            503,
            "ServiceUnavailableException",
            "Bedrock is unable to process your request.",
        ),
        (
            Fault::ServerError,
            500,
            "InternalServerException",
            "The server encountered an internal error while processing the request.",
        ),
    ] {
        server.push(Reply::fault(fault));
        let response = bedrock_call(&server, &body, bearer.clone(), None).await;
        assert_eq!(response.status(), status);
        let header = response.headers()["x-amzn-errortype"].to_str().unwrap();
        assert!(header.starts_with(&format!("{kind}:")), "{header}");
        assert_eq!(response.json::<Value>().await.unwrap()["message"], message);
    }
    // In the stream: a modelled exception message.
    server.push(
        Reply::text("abcdefgh")
            .chunk_size(2)
            .with_fault(Fault::ErrorEventAfter { events: 2 }),
    );
    let response = bedrock_call(&server, &body, bearer, None).await;
    let messages = frames(&response.bytes().await.unwrap());
    let last = messages.last().unwrap();
    assert_eq!(header(last, ":message-type"), "exception");
    assert_eq!(header(last, ":exception-type"), "throttlingException");
    assert_eq!(messages.len(), 3);
}

/// A service-account assertion signed with the test key, for `token_uri`.
fn assertion(email: &str, key_id: &str, token_uri: &str, lifetime: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let head = json!({"alg": "RS256", "typ": "JWT", "kid": key_id});
    let claims = json!({"iss": email, "aud": token_uri, "iat": now, "exp": now + lifetime,
        "scope": "https://www.googleapis.com/auth/cloud-platform"});
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(head.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der: String = TEST_RSA_KEY_PEM
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&STANDARD.decode(der).unwrap()).unwrap();
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .unwrap();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

async fn token(server: &MockServer, form: &[(&str, &str)]) -> (u16, Value) {
    let response = client()
        .post(format!("{}/token", server.url()))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn googles_token_endpoint_grants_what_vertex_accepts() {
    let server = MockServer::start().await.unwrap();
    server.set_google_oauth(GoogleOAuth {
        service_account: Some(("sa@p.iam.gserviceaccount.com".into(), "kid-1".into())),
        authorized_user: Some(("cid".into(), "csecret".into(), "rtoken".into())),
        api_key: None,
        expires_in: 3600,
    });
    let token_uri = format!("{}/token", server.url());
    let jwt_grant = "urn:ietf:params:oauth:grant-type:jwt-bearer";
    let good = assertion("sa@p.iam.gserviceaccount.com", "kid-1", &token_uri, 3600);
    let (status, granted) =
        token(&server, &[("grant_type", jwt_grant), ("assertion", &good)]).await;
    assert_eq!(status, 200, "{granted}");
    assert_eq!(granted["token_type"], "Bearer");
    assert_eq!(granted["expires_in"], 3600);
    let access = granted["access_token"].as_str().unwrap().to_owned();

    // Wrong key id, a wrong audience, an assertion longer than an hour: refused.
    for bad in [
        assertion("sa@p.iam.gserviceaccount.com", "kid-2", &token_uri, 3600),
        assertion(
            "sa@p.iam.gserviceaccount.com",
            "kid-1",
            "https://elsewhere/token",
            3600,
        ),
        assertion("sa@p.iam.gserviceaccount.com", "kid-1", &token_uri, 7200),
    ] {
        let (status, refused) =
            token(&server, &[("grant_type", jwt_grant), ("assertion", &bad)]).await;
        assert_eq!((status, &refused["error"]), (400, &json!("invalid_grant")));
    }
    // A tampered signature.
    let tampered = format!("{}x", &good[..good.len() - 1]);
    let (status, _) = token(
        &server,
        &[("grant_type", jwt_grant), ("assertion", &tampered)],
    )
    .await;
    assert_eq!(status, 400);

    let refresh = [
        ("grant_type", "refresh_token"),
        ("client_id", "cid"),
        ("client_secret", "csecret"),
        ("refresh_token", "rtoken"),
    ];
    let (status, _) = token(&server, &refresh).await;
    assert_eq!(status, 200);
    let (status, refused) = token(
        &server,
        &[("grant_type", "refresh_token"), ("client_id", "x")],
    )
    .await;
    assert_eq!((status, &refused["error"]), (401, &json!("invalid_client")));
    assert_eq!(server.token_grants().len(), 7);

    // Vertex takes the issued token, and refuses any other.
    let (path, body) = request(Api::GoogleVertex, "x");
    let vertex = |bearer: String| {
        client()
            .post(format!("{}{path}", server.url()))
            .header("authorization", format!("Bearer {bearer}"))
            .body(body.to_string())
            .send()
    };
    server.push(Reply::text("hi"));
    assert_eq!(vertex(access).await.unwrap().status(), 200);
    let refused = vertex("ya29.forged".into()).await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["error"]["status"],
        "UNAUTHENTICATED"
    );
}

#[tokio::test]
async fn azure_wants_a_key() {
    let server = MockServer::start().await.unwrap();
    let (path, body) = request(Api::AzureOpenAiResponses, "x");
    let response = client()
        .post(format!("{}{path}", server.url()))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let error = response.json::<Value>().await.unwrap();
    assert_eq!(error["error"]["code"], "401");
    // With a key the same request streams Responses events.
    server.push(Reply::text("hi"));
    let response = post(&server.url(), &path, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        server.requests()[1].query.as_deref(),
        Some("api-version=v1")
    );
}
