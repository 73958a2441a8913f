//! Throughput of the provider layer: a 10,000-delta reply (4 characters each) per API,
//! streamed from tau-mock-llm over loopback HTTP and decoded into events. Reports deltas per
//! second and heap allocations per delta on the consuming thread (the mock runs on its own
//! thread, so its allocations are not counted). The cloud APIs run with the credentials the
//! mock takes without configuration: Azure's key, Vertex's API key (express mode; an ADC token
//! is one exchange per hour, not per delta), and a SigV4 signature made per request.
//!
//!   cargo bench -p tau-ai --bench stream
//!   MOCK_URL=http://127.0.0.1:PORT cargo bench -p tau-ai --bench stream   (external mock)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tau_ai::provider::{Context, ProviderEnv, StreamOptions, http_client, stream};
use tau_mock_llm::{MockServer, Reply};
use tau_protocol::{
    AssistantMessageEvent, InputModality, Message, Model, ModelCost, UserContent, UserMessage,
};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const DELTAS: usize = 10_000;
const APIS: [&str; 7] = [
    "anthropic-messages",
    "openai-completions",
    "openai-responses",
    "google-generative-ai",
    "azure-openai-responses",
    "google-vertex",
    "bedrock-converse-stream",
];

fn model(api: &str, url: &str) -> Model {
    let base_url = match api {
        "anthropic-messages" | "google-vertex" | "bedrock-converse-stream" => url.to_string(),
        "google-generative-ai" => format!("{url}/v1beta"),
        "azure-openai-responses" => format!("{url}/openai/v1"),
        _ => format!("{url}/v1"),
    };
    Model {
        id: "mock-model".into(),
        name: "Mock".into(),
        api: api.into(),
        provider: "mock".into(),
        base_url,
        reasoning: false,
        thinking_level_map: None,
        input: vec![InputModality::Text],
        cost: ModelCost::default(),
        context_window: 200_000,
        max_tokens: 8192,
        headers: None,
        compat: None,
    }
}

#[allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]
fn main() {
    let external = std::env::var("MOCK_URL").ok();
    let mock = match external {
        Some(_) => None,
        None => Some(MockServer::start_background().expect("start the mock")),
    };
    let url = external.unwrap_or_else(|| mock.as_ref().map(|m| m.url()).unwrap_or_default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = http_client();
    let context = Context {
        system_prompt: None,
        messages: vec![Message::User(UserMessage {
            content: UserContent::Text("go".into()),
            timestamp: 0,
            attachments: None,
        })],
        tools: Vec::new(),
    };
    let chunks: Vec<String> = (0..DELTAS).map(|i| format!("{:04}", i % 10_000)).collect();
    println!(
        "{:<24} {:>12} {:>14} {:>10}",
        "api", "deltas/s", "allocs/delta", "ms"
    );
    for api in APIS {
        let mut best: Option<(Duration, u64)> = None;
        for _ in 0..5 {
            let reply = Reply::new().text_chunks(chunks.clone());
            match &mock {
                Some(mock) => mock.push(reply),
                None => runtime.block_on(async {
                    client
                        .post(format!("{url}/_mock/replies"))
                        .json(&reply)
                        .send()
                        .await
                        .expect("script the external mock");
                }),
            }
            let options = StreamOptions {
                api_key: Some("k".into()),
                env: ProviderEnv::new(|name| match name {
                    "AWS_ACCESS_KEY_ID" => Some("AKIDBENCH".into()),
                    "AWS_SECRET_ACCESS_KEY" => Some("bench-secret".into()),
                    "AWS_REGION" => Some("us-east-1".into()),
                    _ => None,
                }),
                ..StreamOptions::default()
            };
            let (elapsed, allocations, deltas) = runtime.block_on(async {
                ALLOCATIONS.store(0, Ordering::Relaxed);
                COUNTED.with(|c| c.set(true));
                let start = Instant::now();
                let mut s = stream(&client, &model(api, &url), &context, options);
                let mut deltas = 0;
                while let Some(event) = s.next().await {
                    if matches!(event, AssistantMessageEvent::TextDelta { .. }) {
                        deltas += 1;
                    }
                }
                let elapsed = start.elapsed();
                COUNTED.with(|c| c.set(false));
                (elapsed, ALLOCATIONS.load(Ordering::Relaxed), deltas)
            });
            assert_eq!(deltas, DELTAS, "{api}: every delta arrives");
            if best.is_none_or(|(t, _)| elapsed < t) {
                best = Some((elapsed, allocations));
            }
        }
        let (elapsed, allocations) = best.unwrap();
        println!(
            "{:<24} {:>12.0} {:>14.2} {:>10.1}",
            api,
            DELTAS as f64 / elapsed.as_secs_f64(),
            allocations as f64 / DELTAS as f64,
            elapsed.as_secs_f64() * 1000.0
        );
    }
}
