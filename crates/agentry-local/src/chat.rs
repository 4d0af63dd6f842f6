//! The local chat model: a llama-family GGUF on candle, its tokenizer and chat template read
//! from the file, token generation with a KV cache, sampling, stop sequences and grammar masks.
//!
//! Loading re-quantizes tensor types candle has no SIMD kernel for (Q4_1, Q5_0, Q5_1) to Q8_0
//! once and caches the result beside the models: 3-4x faster decoding for a one-time cost
//! (`AGENTRY_NO_REQUANT=1` loads the file as it is, to compare).

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::models::llama::{MAX_SEQ_LEN, ModelWeights};
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use minijinja::Environment;
use serde::Serialize;
use tokenizers::Tokenizer;

use crate::LocalError;
use crate::constrain::{Grammar, Matcher, TokenTable};
use crate::paths;

/// A chat message as the template sees it.
#[derive(Debug, Clone, Serialize)]
pub struct TemplateMessage {
    /// The role the template names (`system`, `user`, `assistant`, `tool`).
    pub role: String,
    /// The message text.
    pub content: String,
}

/// How to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// 0 is greedy.
    pub temperature: f32,
    /// Nucleus sampling: only the most likely tokens whose probabilities sum to this.
    pub top_p: f32,
    /// Seed of the sampler (one seed, one output, at any temperature).
    pub seed: u64,
    /// Generation stops before any of these strings.
    pub stop: Vec<String>,
    /// Output must match this grammar; generation ends when the value is complete.
    pub grammar: Option<Arc<Grammar>>,
    /// Prompt lengths worth a KV-cache snapshot besides the whole prompt (the end of a system
    /// turn that many requests share).
    pub cache_points: Vec<usize>,
    /// Above 1, makes word and digit tokens already written in the last 64 less likely
    /// (small models loop on them). Punctuation is exempt: it closes strings and objects.
    pub repeat_penalty: f32,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            temperature: 0.0,
            top_p: 0.95,
            seed: 42,
            stop: Vec::new(),
            grammar: None,
            repeat_penalty: 1.0,
            cache_points: Vec::new(),
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// End-of-turn token, stop string, or a complete grammar value.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The caller's callback asked to stop.
    Cancelled,
}

/// What a generation produced, with timings.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The generated text (stop strings left out).
    pub text: String,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually computed (the rest came from the prefix cache).
    pub prompt_computed: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish: Finish,
    /// Time computing the prompt (prefill).
    pub prompt_time: Duration,
    /// Time generating the completion.
    pub generate_time: Duration,
    /// Time spent computing grammar masks.
    pub mask_time: Duration,
    /// Tokens appended without a model step because the grammar allowed only one.
    pub forced_tokens: usize,
}

/// A KV cache snapshot after a prompt: later prompts that extend it skip those tokens.
struct CacheEntry {
    tokens: Vec<u32>,
    model: ModelWeights,
    logits: Vec<f32>,
}

const CACHE_SLOTS: usize = 4;

/// Prefix tokens whose KV caches [`ChatModel::continuation_logprob`] keeps (46 KB a token for
/// SmolLM2-135M: ~94 MB): an agent's tools are read again on every request, and a tool's text
/// is most of what is read.
const PREFIX_CACHE_TOKENS: usize = 2048;

/// Tokens scored per forward pass by [`ChatModel::line_familiarity`].
pub const FAMILIARITY_WINDOW: usize = 448;

/// Tokens left when a grammar starts wrapping up (see `Matcher::closing`).
const CLOSING_RESERVE: usize = 48;

/// A loaded chat model. Generation is serialized (one at a time): on a CPU the matmuls already
/// use every thread candle is given.
pub struct ChatModel {
    name: String,
    model: ModelWeights,
    tokenizer: Tokenizer,
    table: Arc<TokenTable>,
    template: Environment<'static>,
    bos: String,
    eos_token: String,
    /// Token ids that end a turn.
    end_ids: Vec<u32>,
    cache: Mutex<VecDeque<CacheEntry>>,
    /// Scored prefixes, oldest first (see [`PREFIX_CACHE_TOKENS`]).
    prefixes: Mutex<VecDeque<CacheEntry>>,
    path: PathBuf,
}

impl std::fmt::Debug for ChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatModel")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

fn cerr(e: impl std::fmt::Display) -> LocalError {
    LocalError::Model(e.to_string())
}

/// Tensor types with no fast CPU kernel in candle.
fn slow_type(t: GgmlDType) -> bool {
    matches!(t, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// The file to load: `path` itself, or its Q8_0 re-quantization (made once, then cached).
fn runnable_file(path: &Path) -> Result<PathBuf, LocalError> {
    let mut f = File::open(path).map_err(|e| cerr(format!("{}: {e}", path.display())))?;
    let ct =
        gguf_file::Content::read(&mut f).map_err(|e| cerr(format!("{}: {e}", path.display())))?;
    if std::env::var_os("AGENTRY_NO_REQUANT").is_some()
        || !ct.tensor_infos.values().any(|t| slow_type(t.ggml_dtype))
    {
        return Ok(path.to_owned());
    }
    let meta = std::fs::metadata(path).map_err(cerr)?;
    let stamp = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    let dir = paths::derived_dir();
    let out = dir.join(format!("{stem}.{}-{stamp}.q8_0.gguf", meta.len()));
    if out.exists() {
        return Ok(out);
    }
    tracing::info!(from = %path.display(), to = %out.display(), "re-quantizing to Q8_0 (once)");
    std::fs::create_dir_all(&dir).map_err(cerr)?;
    let dev = Device::Cpu;
    let mut tensors = Vec::with_capacity(ct.tensor_infos.len());
    for name in ct.tensor_infos.keys() {
        let q = ct.tensor(&mut f, name, &dev).map_err(cerr)?;
        let q = if slow_type(q.dtype()) {
            let t = q.dequantize(&dev).map_err(cerr)?;
            QTensor::quantize(&t, GgmlDType::Q8_0).map_err(cerr)?
        } else {
            q
        };
        tensors.push((name.clone(), q));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> =
        ct.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    {
        let mut w = std::io::BufWriter::new(File::create(&tmp).map_err(cerr)?);
        gguf_file::write(&mut w, &metadata, &tensors).map_err(cerr)?;
        std::io::Write::flush(&mut w).map_err(cerr)?;
    }
    std::fs::rename(&tmp, &out).map_err(cerr)?;
    Ok(out)
}

/// Pre-tokenizers that candle's GGUF tokenizer builder does not know, by `tokenizer.ggml.pre`.
fn fix_pre_tokenizer(tokenizer: &mut Tokenizer, pre: &str) {
    use tokenizers::pre_tokenizers::{byte_level::ByteLevel, digits::Digits, sequence::Sequence};
    if pre == "smollm" {
        // SmolLM2's tokenizer.json: digits one by one, then GPT-2 byte level.
        tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])));
    }
}

/// GPT-2's byte-level alphabet, reversed: the character a vocabulary entry uses for each byte.
fn byte_decoder() -> std::collections::HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.into_iter()
        .zip(cs)
        .filter_map(|(b, c)| Some((char::from_u32(c)?, b as u8)))
        .collect()
}

const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

impl ChatModel {
    /// Loads the default model ([`paths::chat_model_path`]).
    pub fn load_default() -> Result<ChatModel, LocalError> {
        Self::load(&paths::chat_model_path())
    }

    /// Loads a llama-family GGUF file (tokenizer and chat template from its metadata).
    pub fn load(path: &Path) -> Result<ChatModel, LocalError> {
        paths::require(path, "chat model")?;
        let file = runnable_file(path)?;
        let mut reader = BufReader::new(File::open(&file).map_err(cerr)?);
        let ct = gguf_file::Content::read(&mut reader).map_err(cerr)?;
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if arch != "llama" {
            return Err(LocalError::Model(format!(
                "{}: architecture `{arch}` is not supported (llama-family GGUF only)",
                path.display()
            )));
        }
        let meta_str = |k: &str| ct.metadata.get(k).and_then(|v| v.to_string().ok()).cloned();
        let meta_u32 = |k: &str| ct.metadata.get(k).and_then(|v| v.to_u32().ok());
        let name = meta_str("general.name").unwrap_or_else(|| {
            path.file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("local")
                .to_owned()
        });
        use candle_core::quantized::tokenizer::TokenizerFromGguf;
        let mut tokenizer = Tokenizer::from_gguf(&ct).map_err(cerr)?;
        fix_pre_tokenizer(
            &mut tokenizer,
            &meta_str("tokenizer.ggml.pre").unwrap_or_default(),
        );
        let template_src = meta_str("tokenizer.chat_template").unwrap_or_else(|| CHATML.into());
        let tokens = ct
            .metadata
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.to_vec().ok())
            .ok_or_else(|| cerr("GGUF has no tokenizer.ggml.tokens"))?;
        let vocab: Vec<String> = tokens
            .iter()
            .map(|v| v.to_string().cloned().unwrap_or_default())
            .collect();
        let eos_id = meta_u32("tokenizer.ggml.eos_token_id");
        let bos_id = meta_u32("tokenizer.ggml.bos_token_id");
        let model = ModelWeights::from_gguf(ct, &mut reader, &Device::Cpu).map_err(cerr)?;

        // Token bytes for grammar masks; special tokens get none (a grammar never allows them).
        let specials: std::collections::HashSet<u32> = tokenizer
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| *id)
            .collect();
        let dec = byte_decoder();
        let bytes: Vec<Vec<u8>> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if specials.contains(&(i as u32)) {
                    return Vec::new();
                }
                t.chars()
                    .map(|c| dec.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_default()
            })
            .collect();
        let mut end_ids: Vec<u32> = eos_id.into_iter().collect();
        for t in ["<|im_end|>", "<|eot_id|>", "<|end|>", "</s>"] {
            if let Some(id) = tokenizer.token_to_id(t)
                && !end_ids.contains(&id)
            {
                end_ids.push(id);
            }
        }
        let table = Arc::new(TokenTable::new(bytes, end_ids.first().copied()));

        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template_owned("chat", template_src)
            .map_err(|e| cerr(format!("chat template: {e}")))?;
        let tok_str = |id: Option<u32>| {
            id.and_then(|i| vocab.get(i as usize))
                .cloned()
                .unwrap_or_default()
        };
        Ok(ChatModel {
            name,
            model,
            tokenizer,
            table,
            template: env,
            bos: tok_str(bos_id),
            eos_token: tok_str(eos_id),
            end_ids,
            cache: Mutex::new(VecDeque::new()),
            prefixes: Mutex::new(VecDeque::new()),
            path: path.to_owned(),
        })
    }

    /// The model's name (its file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every token's bytes, as grammar masks need them.
    pub fn token_table(&self) -> &Arc<TokenTable> {
        &self.table
    }

    /// The prompt for a conversation, ending with the assistant's turn opened.
    pub fn render(&self, messages: &[TemplateMessage]) -> Result<String, LocalError> {
        let t = self.template.get_template("chat").map_err(cerr)?;
        t.render(minijinja::context! {
            messages => messages,
            add_generation_prompt => true,
            bos_token => &self.bos,
            eos_token => &self.eos_token,
        })
        .map_err(|e| cerr(format!("chat template: {e}")))
    }

    /// Token ids of a conversation's prompt, and where its first (system) turn ends when the
    /// template renders that turn on its own as a prefix of the whole: a point worth caching.
    pub fn encode_chat(
        &self,
        messages: &[TemplateMessage],
    ) -> Result<(Vec<u32>, Option<usize>), LocalError> {
        let ids = self.encode(&self.render(messages)?)?;
        let mut point = None;
        if messages.len() > 1 && messages[0].role == "system" {
            let t = self.template.get_template("chat").map_err(cerr)?;
            let head = t
                .render(minijinja::context! {
                    messages => &messages[..1],
                    add_generation_prompt => false,
                    bos_token => &self.bos,
                    eos_token => &self.eos_token,
                })
                .map_err(cerr)?;
            let head = self.encode(&head)?;
            if ids.starts_with(&head) {
                point = Some(head.len());
            }
        }
        Ok((ids, point))
    }

    /// Token ids of `text` (special tokens in it are recognized).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(cerr)?
            .get_ids()
            .to_vec())
    }

    /// The log-probability of `continuation` after `prefix` (the sum over its tokens), e.g.
    /// how likely a request is after a tool's description.
    pub fn continuation_logprob(
        &self,
        prefix: &[u32],
        continuation: &[u32],
    ) -> Result<f32, LocalError> {
        Ok(self.token_logprobs(prefix, continuation)?.iter().sum())
    }

    /// The log-probability of each token of `continuation` after `prefix` and the tokens
    /// before it: where in a text the model is sure of what comes, as in a line it knows by
    /// heart.
    pub fn token_logprobs(
        &self,
        prefix: &[u32],
        continuation: &[u32],
    ) -> Result<Vec<f32>, LocalError> {
        self.scored(prefix, continuation, true)
    }

    /// [`Self::token_logprobs`], keeping the prefix's KV cache for the next call when `keep`.
    fn scored(
        &self,
        prefix: &[u32],
        continuation: &[u32],
        keep: bool,
    ) -> Result<Vec<f32>, LocalError> {
        if prefix.is_empty() || continuation.is_empty() {
            return Err(LocalError::Model("empty prefix or continuation".into()));
        }
        if prefix.len() + continuation.len() >= MAX_SEQ_LEN {
            return Err(LocalError::ContextTooLong {
                tokens: prefix.len() + continuation.len(),
                max: MAX_SEQ_LEN,
            });
        }
        let cached = {
            let prefixes = self.prefixes.lock().unwrap_or_else(|p| p.into_inner());
            prefixes
                .iter()
                .find(|e| e.tokens == prefix)
                .map(|e| (e.model.clone(), e.logits.clone()))
        };
        let (mut model, first) = match cached {
            Some(hit) => hit,
            None => {
                let mut model = self.model.clone();
                model.clear_kv_cache();
                let first = forward(&mut model, prefix, 0)?;
                let mut prefixes = self.prefixes.lock().unwrap_or_else(|p| p.into_inner());
                if keep
                    && prefix.len() <= PREFIX_CACHE_TOKENS
                    && !prefixes.iter().any(|e| e.tokens == prefix)
                {
                    while prefixes.iter().map(|e| e.tokens.len()).sum::<usize>() + prefix.len()
                        > PREFIX_CACHE_TOKENS
                    {
                        prefixes.pop_front();
                    }
                    prefixes.push_back(CacheEntry {
                        tokens: prefix.to_vec(),
                        model: model.clone(),
                        logits: first.clone(),
                    });
                }
                (model, first)
            }
        };
        let mut each = Vec::with_capacity(continuation.len());
        each.push(log_softmax_at(&first, continuation[0]));
        if continuation.len() > 1 {
            let input = Tensor::new(&continuation[..continuation.len() - 1], &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(cerr)?;
            let all = model
                .forward_all(&input, prefix.len())
                .and_then(|t| t.to_dtype(candle_core::DType::F32))
                .and_then(|t| t.to_vec2::<f32>())
                .map_err(cerr)?;
            for (row, &next) in all.iter().zip(&continuation[1..]) {
                each.push(log_softmax_at(row, next));
            }
        }
        Ok(each)
    }

    /// How sure the model is of each of `lines`, read in order after `lead`: the mean
    /// log-probability of each line's tokens after its first (the first word of a line is
    /// open; what follows is not, in a line the model knows by heart). Lines a language
    /// model's training text quotes again and again score far above the rest: Macbeth's
    /// "To-morrow, and to-morrow, and to-morrow" -1.0, the lines round it -2.5 to -4.5. Read
    /// in windows of [`FAMILIARITY_WINDOW`] tokens, each after the 64 before it.
    pub fn line_familiarity(&self, lead: &str, lines: &[&str]) -> Result<Vec<f32>, LocalError> {
        let mut stream = self.encode(lead)?;
        if stream.is_empty() {
            stream = self.encode("\n")?;
        }
        let start = stream.len();
        let mut spans = Vec::with_capacity(lines.len());
        for line in lines {
            let ids = self.encode(&format!("{}\n", line.trim()))?;
            spans.push((stream.len(), stream.len() + ids.len()));
            stream.extend(ids);
        }
        let mut lp = vec![0f32; stream.len()];
        let mut at = start;
        while at < stream.len() {
            let end = (at + FAMILIARITY_WINDOW).min(stream.len());
            let prefix = &stream[at.saturating_sub(64)..at];
            // The windows' prefixes are not kept: no other call reads them.
            let each = self.scored(prefix, &stream[at..end], false)?;
            lp[at..end].copy_from_slice(&each);
            at = end;
        }
        Ok(spans
            .into_iter()
            .map(|(a, b)| {
                let rest = &lp[(a + 1).min(b)..b];
                if rest.is_empty() {
                    f32::NEG_INFINITY
                } else {
                    rest.iter().sum::<f32>() / rest.len() as f32
                }
            })
            .collect())
    }

    /// Generates a continuation of `prompt`. `on_text` gets each new piece of text and returns
    /// false to stop.
    pub fn generate(
        &self,
        prompt: &[u32],
        opts: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation, LocalError> {
        if prompt.is_empty() {
            return Err(LocalError::Model("empty prompt".into()));
        }
        if prompt.len() + opts.max_tokens >= MAX_SEQ_LEN {
            return Err(LocalError::ContextTooLong {
                tokens: prompt.len() + opts.max_tokens,
                max: MAX_SEQ_LEN,
            });
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        // The longest cached prompt this one extends.
        let hit = cache
            .iter()
            .enumerate()
            .filter(|(_, e)| e.tokens.len() <= prompt.len() && prompt.starts_with(&e.tokens))
            .max_by_key(|(_, e)| e.tokens.len())
            .map(|(i, _)| i);
        let (mut model, mut logits, hit_len) = match hit {
            Some(i) => {
                let e = &cache[i];
                (e.model.clone(), e.logits.clone(), e.tokens.len())
            }
            None => {
                let mut m = self.model.clone();
                m.clear_kv_cache();
                (m, Vec::new(), 0)
            }
        };
        let mut done = hit_len;
        // Snapshot at the cache points (e.g. the end of the system turn), then the prompt's end.
        let mut points: Vec<usize> = opts
            .cache_points
            .iter()
            .copied()
            .filter(|&p| p > done && p < prompt.len())
            .collect();
        points.sort_unstable();
        points.push(prompt.len());
        for p in points {
            if done < p {
                logits = forward(&mut model, &prompt[done..p], done)?;
                done = p;
            }
            if cache.iter().any(|e| e.tokens == prompt[..p]) {
                continue;
            }
            if cache.len() >= CACHE_SLOTS {
                cache.pop_front();
            }
            cache.push_back(CacheEntry {
                tokens: prompt[..p].to_vec(),
                model: model.clone(),
                logits: logits.clone(),
            });
        }
        let done = hit_len;
        drop(cache);
        let prompt_time = started.elapsed();

        let gen_start = Instant::now();
        let mut rng = SplitMix(opts.seed);
        let mut matcher = opts.grammar.as_ref().map(|g| Matcher::from_arc(g.clone()));
        let mut out_bytes: Vec<u8> = Vec::new();
        let mut emitted = 0usize; // bytes of out_bytes already given to on_text
        let mut pos = prompt.len();
        let mut pending: Vec<u32> = Vec::new();
        let mut pending_all: Vec<u32> = Vec::new(); // every generated token
        let mut n_generated = 0usize;
        let mut forced = 0usize;
        let mut mask_time = Duration::ZERO;
        let mut finish = Finish::Length;
        // `logits` belong to the sequence so far unless tokens wait in `pending`.
        let mut have_logits = true;
        while n_generated < opts.max_tokens {
            let mut allowed = None;
            if let Some(m) = &mut matcher {
                // Leave room to close the value: keys and brackets still to come are forced.
                if opts.max_tokens - n_generated <= CLOSING_RESERVE {
                    m.closing = true;
                }
                if m.is_done() {
                    finish = Finish::Stop;
                    break;
                }
                let t0 = Instant::now();
                let a = self.table.allowed(m);
                mask_time += t0.elapsed();
                if a.is_empty() {
                    return Err(LocalError::Model(
                        "grammar allows no token here (the vocabulary cannot express it)".into(),
                    ));
                }
                allowed = Some(a);
            }
            let next = match allowed.as_deref() {
                // Jump ahead: the grammar leaves no choice, so no model step is needed.
                Some([only]) => {
                    forced += 1;
                    *only
                }
                _ => {
                    if !have_logits {
                        logits = forward(&mut model, &pending, pos)?;
                        pos += pending.len();
                        pending.clear();
                    }
                    if opts.repeat_penalty > 1.0 {
                        self.penalize(&mut logits, &pending_all, opts.repeat_penalty);
                    }
                    match self.wants_to_close(&logits, matcher.as_ref(), allowed.as_deref()) {
                        Some(quote) => quote,
                        None => sample(&logits, allowed.as_deref(), opts, &mut rng),
                    }
                }
            };
            if self.end_ids.contains(&next) {
                finish = Finish::Stop;
                break;
            }
            if let Some(m) = &mut matcher
                && !m.feed(self.table.bytes(next))
            {
                return Err(LocalError::Model(format!("grammar refused token {next}")));
            }
            n_generated += 1;
            pending.push(next);
            pending_all.push(next);
            have_logits = false;
            out_bytes.extend_from_slice(self.token_bytes(next).as_slice());
            // Stop strings: cut the text before the first one.
            if let Some(cut) = opts
                .stop
                .iter()
                .filter_map(|s| find(&out_bytes, s.as_bytes()))
                .min()
            {
                out_bytes.truncate(cut);
                finish = Finish::Stop;
                break;
            }
            // Hold back bytes that could start a stop string or an unfinished UTF-8 character.
            let hold = opts
                .stop
                .iter()
                .map(|s| partial_suffix(&out_bytes, s.as_bytes()))
                .max()
                .unwrap_or(0);
            let ready = utf8_boundary(&out_bytes[..out_bytes.len() - hold]);
            if ready > emitted {
                let piece = String::from_utf8_lossy(&out_bytes[emitted..ready]).into_owned();
                emitted = ready;
                if !on_text(&piece) {
                    finish = Finish::Cancelled;
                    break;
                }
            }
        }
        if emitted < out_bytes.len() {
            on_text(&String::from_utf8_lossy(&out_bytes[emitted..]));
        }
        if matcher.as_ref().is_some_and(Matcher::is_done) {
            finish = Finish::Stop;
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&out_bytes).into_owned(),
            prompt_tokens: prompt.len(),
            prompt_computed: prompt.len() - done,
            completion_tokens: n_generated,
            finish,
            prompt_time,
            generate_time: gen_start.elapsed(),
            mask_time,
            forced_tokens: forced,
        })
    }

    /// A token's text bytes (special tokens decode through the tokenizer).
    fn token_bytes(&self, id: u32) -> Vec<u8> {
        let b = self.table.bytes(id);
        if !b.is_empty() {
            return b.to_vec();
        }
        self.tokenizer
            .decode(&[id], false)
            .map(String::into_bytes)
            .unwrap_or_default()
    }

    /// Inside a non-empty string, when the model's own favourite token is one the grammar
    /// refuses and it starts like the end of a value (`}`, `,`, `]`, `"`), the model meant to
    /// end the string: close it instead of letting it ramble on in string content.
    fn wants_to_close(
        &self,
        logits: &[f32],
        m: Option<&Matcher>,
        allowed: Option<&[u32]>,
    ) -> Option<u32> {
        let (m, allowed) = (m?, allowed?);
        if m.open_string()? == 0 {
            return None;
        }
        let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b]))? as u32;
        if allowed.contains(&best) {
            return None;
        }
        let first = *self.table.bytes(best).first()?;
        if !matches!(first, b'}' | b',' | b']' | b'"') {
            return None;
        }
        allowed
            .iter()
            .copied()
            .find(|&t| self.table.bytes(t) == b"\"")
    }

    fn penalize(&self, logits: &mut [f32], generated: &[u32], penalty: f32) {
        let start = generated.len().saturating_sub(64);
        let mut seen: Vec<u32> = generated[start..].to_vec();
        seen.sort_unstable();
        seen.dedup();
        for id in seen {
            let b = self.table.bytes(id);
            let wordy = !b.is_empty() && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b' ');
            if let Some(l) = logits.get_mut(id as usize)
                && wordy
            {
                *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
            }
        }
    }

    /// Drops cached prompts (frees their KV caches).
    pub fn clear_cache(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

fn forward(model: &mut ModelWeights, tokens: &[u32], pos: usize) -> Result<Vec<f32>, LocalError> {
    let input = Tensor::new(tokens, &Device::Cpu)
        .and_then(|t| t.unsqueeze(0))
        .map_err(cerr)?;
    let logits = model.forward(&input, pos).map_err(cerr)?;
    logits
        .squeeze(0)
        .and_then(|t| t.to_dtype(candle_core::DType::F32))
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(cerr)
}

/// `log softmax(logits)[id]`, or negative infinity for an id outside the vocabulary.
fn log_softmax_at(logits: &[f32], id: u32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    logits
        .get(id as usize)
        .map_or(f32::NEG_INFINITY, |&l| l - max - sum.ln())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest suffix of `hay` that is a proper prefix of `needle`.
fn partial_suffix(hay: &[u8], needle: &[u8]) -> usize {
    (1..needle.len().min(hay.len() + 1))
        .rev()
        .find(|&k| hay.ends_with(&needle[..k]))
        .unwrap_or(0)
}

/// The longest prefix of `b` that does not end inside a UTF-8 character.
fn utf8_boundary(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => b.len(),
    }
}

/// A small seeded generator for sampling (no need for a crate).
struct SplitMix(u64);

impl SplitMix {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Greedy or temperature/top-p sampling over the allowed tokens.
fn sample(
    logits: &[f32],
    allowed: Option<&[u32]>,
    opts: &GenerateOptions,
    rng: &mut SplitMix,
) -> u32 {
    let ids: Vec<u32> = match allowed {
        Some(a) => a
            .iter()
            .copied()
            .filter(|&i| (i as usize) < logits.len())
            .collect(),
        None => (0..logits.len() as u32).collect(),
    };
    let best = ids
        .iter()
        .copied()
        .max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]))
        .unwrap_or(0);
    if opts.temperature <= 0.0 || ids.len() < 2 {
        return best;
    }
    let max = logits[best as usize];
    let mut probs: Vec<(u32, f32)> = ids
        .iter()
        .map(|&i| (i, ((logits[i as usize] - max) / opts.temperature).exp()))
        .collect();
    probs.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
    let total: f32 = probs.iter().map(|p| p.1).sum();
    let mut keep = 0.0;
    let mut cut = probs.len();
    for (i, p) in probs.iter().enumerate() {
        keep += p.1 / total;
        if keep >= opts.top_p {
            cut = i + 1;
            break;
        }
    }
    probs.truncate(cut);
    let total: f32 = probs.iter().map(|p| p.1).sum();
    let mut r = rng.next_f32() * total;
    for (id, p) in &probs {
        r -= p;
        if r <= 0.0 {
            return *id;
        }
    }
    probs.last().map_or(best, |p| p.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prompt path (`ModelWeights::prefill`) gives the candle path's logits, from
    /// position 0 and after a cached prefix, and leaves KV caches from which generation picks
    /// the same next tokens.
    #[test]
    fn prompt_path_matches_the_candle_path() {
        let Some(path) = agentry_testkit::require_path(
            agentry_testkit::Peer::Models,
            paths::chat_model_path(),
            "run `bash scripts/fetch-models.sh`",
        ) else {
            return;
        };
        let m = ChatModel::load(&path).expect("the embedded chat model loads");
        let text = "Hamlet, Prince of Denmark, returns home to find his father dead and his \
                    mother married to his uncle Claudius. A ghost on the battlements tells him that \
                    Claudius poured poison in his sleeping father's ear.";
        let ids = m.encode(text).unwrap();
        assert!(ids.len() >= 2 * 16, "{} tokens", ids.len());
        let split = ids.len() / 2;
        let tensor = |ids: &[u32]| {
            Tensor::new(ids, &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap()
        };
        let logits = |t: Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        // (largest difference, largest magnitude of `b`)
        let apart = |a: &[f32], b: &[f32]| {
            let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            (diff, b.iter().fold(0f32, |m, v| m.max(v.abs())))
        };
        let argmax = |v: &[f32]| (0..v.len()).max_by(|&x, &y| v[x].total_cmp(&v[y])).unwrap();
        let (mut fast, mut slow) = (m.model.clone(), m.model.clone());
        fast.clear_kv_cache();
        slow.clear_kv_cache();
        let mut next = 0;
        for (i, (chunk, pos)) in [(&ids[..split], 0), (&ids[split..], split)]
            .into_iter()
            .enumerate()
        {
            let a = logits(fast.forward(&tensor(chunk), pos).unwrap());
            let b = logits(slow.forward_candle(&tensor(chunk), pos).unwrap());
            let (diff, top) = apart(&a, &b);
            assert!(
                diff <= 1e-3 * top,
                "step {i}: logits differ by {diff} (largest {top})"
            );
            assert_eq!(argmax(&a), argmax(&b), "step {i}");
            next = argmax(&a) as u32;
        }
        // Generation from each side's caches, one token at a time on quantized products with
        // the activations quantized too: a difference of 1e-5 in a cache (what the two paths'
        // summation orders leave) changes nothing until it flips the rounding of a quantized
        // activation, and then a logit by up to ~3% of the largest (measured: 0.8 of 28 by the
        // sixth token), enough to swap two close candidates. A cache laid out wrongly changes
        // them by more than half (measured against an empty cache: 16-36).
        for pos in ids.len()..ids.len() + 8 {
            let a = logits(fast.forward(&tensor(&[next]), pos).unwrap());
            let b = logits(slow.forward(&tensor(&[next]), pos).unwrap());
            let (diff, top) = apart(&a, &b);
            assert!(
                diff <= 0.1 * top,
                "token at {pos}: logits differ by {diff} (largest {top})"
            );
            next = argmax(&b) as u32;
        }
    }

    #[test]
    fn stop_string_helpers() {
        assert_eq!(partial_suffix(b"hello <|im", b"<|im_end|>"), 4);
        assert_eq!(partial_suffix(b"hello", b"<|im_end|>"), 0);
        assert_eq!(find(b"abc</s>x", b"</s>"), Some(3));
        assert_eq!(utf8_boundary("é".as_bytes()), 2);
        assert_eq!(utf8_boundary(&"é".as_bytes()[..1]), 0);
    }

    #[test]
    fn byte_level_alphabet_round_trips() {
        let d = byte_decoder();
        assert_eq!(d.len(), 256);
        assert_eq!(d[&'Ġ'], b' ');
        assert_eq!(d[&'Ċ'], b'\n');
        assert_eq!(d[&'a'], b'a');
    }

    #[test]
    fn sampling_respects_the_mask() {
        let logits = vec![5.0, 1.0, 3.0, 9.0];
        let opts = GenerateOptions::default();
        let mut rng = SplitMix(1);
        assert_eq!(sample(&logits, None, &opts, &mut rng), 3);
        assert_eq!(sample(&logits, Some(&[1, 2]), &opts, &mut rng), 2);
        let hot = GenerateOptions {
            temperature: 1.0,
            top_p: 1.0,
            ..Default::default()
        };
        for _ in 0..50 {
            let t = sample(&logits, Some(&[0, 1]), &hot, &mut rng);
            assert!(t == 0 || t == 1);
        }
    }
}
