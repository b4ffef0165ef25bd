// tl-live.js: the book's formulas in JavaScript, one function per formula, named as in
// transformer_lib, and the forward passes of its two trained models, run in the reader's
// browser in float32 with no framework and nothing fetched from another host.
//
// One sequence at a time, so there is no batch axis B: where the library writes
// (B, T, d_model) this file writes (T, d_model), and heads are (h, T, d_k).
// Dimension legend (ARCHITECTURE.md): T (T_q queries, T_k keys; T_src, T_tgt), d_model,
// h heads (n_heads), h_kv K/V heads (n_kv_heads), d_k = d_model / h, d_ff, V vocab_size.
// Masks hold 1 where the query may attend (True in the library), 0 where it may not.
//
// A tensor is {data: Float32Array, shape: [..]}, row-major. Sums are accumulated in
// JavaScript's float64 numbers and stored in float32, as the weights are.
//
// The page contract, window.tlLive, is documented in ARCHITECTURE.md ("The live pages").

// -- tensors --------------------------------------------------------------------------
// <tensor>
export function tensor(data, shape) {
  const size = shape.reduce((a, b) => a * b, 1);
  const array = data instanceof Float32Array ? data : Float32Array.from(data);
  if (array.length !== size) {
    throw new Error(`tensor: ${array.length} values do not fill shape (${shape})`);
  }
  return { data: array, shape: shape.slice() };
}

export function zeros(shape) {
  return tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)), shape);
}

// nested arrays (any depth) -> tensor, and back
export function fromNested(nested) {
  const shape = [];
  for (let a = nested; Array.isArray(a); a = a[0]) shape.push(a.length);
  return tensor(Float32Array.from(nested.flat(Infinity), Number), shape);
}

export function toNested(t) {
  const { data, shape } = t;
  const build = (axis, offset) => {
    if (axis === shape.length) return data[offset];
    const stride = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
    const out = new Array(shape[axis]);
    for (let i = 0; i < shape[axis]; i++) out[i] = build(axis + 1, offset + i * stride);
    return out;
  };
  if (shape.length === 0) return data[0];
  return build(0, 0);
}

function lastDim(x) {
  return x.shape[x.shape.length - 1];
}
// </tensor>

// -- softmax and attention (chapters 2-4) ---------------------------------------------
// <softmax>
// softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x)   (eq. softmax,
// stable-softmax), over the last axis. A row that is all -inf gives zeros, not NaN.
export function softmax(x) {
  const n = lastDim(x);
  const out = new Float32Array(x.data.length);
  for (let r = 0; r < x.data.length; r += n) {
    let m = -Infinity;
    for (let i = 0; i < n; i++) m = Math.max(m, x.data[r + i]);
    if (!Number.isFinite(m)) m = 0; // an all -inf row keeps exp() = 0
    let s = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.fround(Math.exp(x.data[r + i] - m));
      out[r + i] = e;
      s += e;
    }
    s = Math.max(s, 1.1754943508222875e-38); // float32's tiny: 0 / tiny = 0
    for (let i = 0; i < n; i++) out[r + i] = out[r + i] / s;
  }
  return tensor(out, x.shape);
}
// </softmax>

// <attention_scores>
// S = Q K^T / sqrt(d_k)   (eq. scores, scaled-scores); scale = false gives Q K^T.
// q (..., T_q, d_k), k (..., T_k, d_k) -> (..., T_q, T_k)
export function attention_scores(q, k, scale = true) {
  const [T_q, d_k] = q.shape.slice(-2);
  const T_k = k.shape[k.shape.length - 2];
  if (lastDim(k) !== d_k || q.data.length / (T_q * d_k) !== k.data.length / (T_k * d_k)) {
    throw new Error(`attention_scores: q (${q.shape}) and k (${k.shape}) do not fit`);
  }
  const n = q.data.length / (T_q * d_k); // the leading axes, flattened
  const c = scale ? 1 / Math.sqrt(d_k) : 1;
  const out = new Float32Array(n * T_q * T_k);
  for (let b = 0; b < n; b++) {
    for (let i = 0; i < T_q; i++) {
      const qi = (b * T_q + i) * d_k;
      for (let j = 0; j < T_k; j++) {
        const kj = (b * T_k + j) * d_k;
        let s = 0;
        for (let c2 = 0; c2 < d_k; c2++) s += q.data[qi + c2] * k.data[kj + c2];
        out[(b * T_q + i) * T_k + j] = Math.fround(s) * c; // q . k, then / sqrt(d_k)
      }
    }
  }
  return tensor(out, [...q.shape.slice(0, -1), T_k]);
}
// </attention_scores>

// <scaled_dot_product_attention>
// Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V   (eq. attention) -> [out, weights].
// q (..., T_q, d_k), k and v (..., T_k, d_k); mask (T_q, T_k) or (..., T_q, T_k), 1 = may
// attend: masked scores become -inf, so a row with no key allowed gets zero weights.
// out (..., T_q, d_k), weights (..., T_q, T_k)
export function scaled_dot_product_attention(q, k, v, mask = null) {
  const scores = attention_scores(q, k); // (..., T_q, T_k)
  if (mask) {
    const m = mask.data.length;
    if (scores.data.length % m || lastDim(mask) !== lastDim(scores)) {
      throw new Error(`mask (${mask.shape}) does not fit the scores (${scores.shape})`);
    }
    for (let i = 0; i < scores.data.length; i++) {
      if (!mask.data[i % m]) scores.data[i] = -Infinity;
    }
  }
  const weights = softmax(scores); // rows sum to 1 (or 0 if fully masked)
  return [matmul(weights, v), weights]; // (..., T_q, T_k) @ (..., T_k, d_v)
}

// a (..., n, m) @ b (..., m, p) -> (..., n, p), the same leading axes
export function matmul(a, b) {
  const [n, m] = a.shape.slice(-2);
  const p = lastDim(b);
  const batch = a.data.length / (n * m);
  if (b.shape[b.shape.length - 2] !== m || b.data.length !== batch * m * p) {
    throw new Error(`matmul: (${a.shape}) @ (${b.shape}) do not fit`);
  }
  const out = new Float32Array(batch * n * p);
  for (let z = 0; z < batch; z++) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < p; j++) {
        let s = 0;
        for (let t = 0; t < m; t++) {
          s += a.data[(z * n + i) * m + t] * b.data[(z * m + t) * p + j];
        }
        out[(z * n + i) * p + j] = s;
      }
    }
  }
  return tensor(out, [...a.shape.slice(0, -1), p]);
}
// </scaled_dot_product_attention>

// <causal_mask>
// M[i, j] = (j <= i + (T_k - T_q))   (eq. causal-mask), (T_q, T_k): aligned to the end,
// the last query sees every key.
export function causal_mask(T_q, T_k = T_q) {
  const data = new Uint8Array(T_q * T_k);
  for (let i = 0; i < T_q; i++) {
    for (let j = 0; j < T_k; j++) data[i * T_k + j] = j <= i + (T_k - T_q) ? 1 : 0;
  }
  return { data, shape: [T_q, T_k] };
}
// </causal_mask>

// -- the feed-forward network (chapter 6) ---------------------------------------------
// <linear>
// nn.Linear: x (..., d_in) -> x W^T + b (..., d_out); weight (d_out, d_in), bias (d_out,)
export function linear(x, weight, bias = null) {
  const [d_out, d_in] = weight.shape;
  if (lastDim(x) !== d_in) {
    throw new Error(`linear: x (${x.shape}) does not fit weight (${weight.shape})`);
  }
  const rows = x.data.length / d_in;
  const out = new Float32Array(rows * d_out);
  const W = weight.data;
  const X = x.data;
  const b = bias ? bias.data : null;
  for (let r = 0; r < rows; r++) {
    const xr = r * d_in;
    for (let o = 0; o < d_out; o++) {
      const wo = o * d_in;
      let s = b ? b[o] : 0;
      for (let i = 0; i < d_in; i++) s += X[xr + i] * W[wo + i];
      out[r * d_out + o] = s;
    }
  }
  return tensor(out, [...x.shape.slice(0, -1), d_out]);
}
// </linear>

// <activations>
// GELU_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (eq. gelu-tanh)
export function gelu_tanh(x) {
  const c = Math.sqrt(2 / Math.PI);
  return map(x, (v) => 0.5 * v * (1 + Math.tanh(c * (v + 0.044715 * v * v * v))));
}

// SiLU(x) = x sigma(x) = x / (1 + e^(-x))   (eq. silu)
export function silu(x) {
  return map(x, (v) => v / (1 + Math.exp(-v)));
}

export function relu(x) {
  return map(x, (v) => Math.max(0, v));
}

// the exact GELU, x Phi(x) = x/2 (1 + erf(x / sqrt 2))
export function gelu(x) {
  return map(x, (v) => 0.5 * v * (1 + erf(v / Math.SQRT2)));
}

// erf by its Taylor series for |x| < 4 (float64 cancellation leaves ~1e-11), and 1 -
// erfc(x) by its continued fraction beyond (erfc(4) < 2e-8)
function erf(x) {
  const a = Math.abs(x);
  let r;
  if (a < 4) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 80; n++) {
      term *= (-a * a) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    let f = 0;
    for (let n = 60; n >= 1; n--) f = n / 2 / (a + f);
    r = 1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
  }
  return x < 0 ? -r : r;
}

function map(x, f) {
  const out = new Float32Array(x.data.length);
  for (let i = 0; i < out.length; i++) out[i] = f(x.data[i]);
  return tensor(out, x.shape);
}

export const ACTIVATIONS = { relu, gelu, gelu_tanh, silu };
// </activations>

// <feed_forward>
// FFN(x) = act(x W_1 + b_1) W_2 + b_2   (eq. ffn); gated (eq. glu-ffn):
// FFN(x) = (act(x W_gate) * (x W_up)) W_down. p = {linear1, linear2, linear_up}, each
// {weight, bias}. x (T, d_model) -> (T, d_model)
export function feed_forward(x, p, activation = "relu", gated = false) {
  let h = ACTIVATIONS[activation](linear(x, p.linear1.weight, p.linear1.bias)); // (T, d_ff)
  if (gated) {
    const up = linear(x, p.linear_up.weight, p.linear_up.bias); // (T, d_ff)
    for (let i = 0; i < h.data.length; i++) h.data[i] *= up.data[i];
  }
  return linear(h, p.linear2.weight, p.linear2.bias); // (T, d_ff) -> (T, d_model)
}
// </feed_forward>

// -- normalisation (chapters 7, 16) ---------------------------------------------------
// <layer_norm>
// LN(z) = gamma (z - mu) / sqrt(sigma^2 + eps) + beta over the last axis (eq. layer-norm),
// sigma^2 the biased variance, of the centred values.
export function layer_norm(x, gamma, beta, eps = 1e-5) {
  const n = lastDim(x);
  if (gamma.data.length !== n || beta.data.length !== n) {
    throw new Error(
      `layer_norm: gamma (${gamma.shape}), beta (${beta.shape}) vs x (${x.shape})`,
    );
  }
  const out = new Float32Array(x.data.length);
  for (let r = 0; r < x.data.length; r += n) {
    let mu = 0;
    for (let i = 0; i < n; i++) mu += x.data[r + i];
    mu /= n;
    let v = 0;
    for (let i = 0; i < n; i++) v += (x.data[r + i] - mu) ** 2;
    const inv = 1 / Math.sqrt(v / n + eps);
    for (let i = 0; i < n; i++) {
      out[r + i] = gamma.data[i] * (x.data[r + i] - mu) * inv + beta.data[i];
    }
  }
  return tensor(out, x.shape);
}
// </layer_norm>

// <rms_norm>
// RMSNorm(z) = gamma z / sqrt(mean(z^2) + eps) over the last axis   (eq. rms-norm)
export function rms_norm(x, weight, eps = 1e-6) {
  const n = lastDim(x);
  if (weight.data.length !== n) {
    throw new Error(`rms_norm: weight (${weight.shape}) vs x (${x.shape})`);
  }
  const out = new Float32Array(x.data.length);
  for (let r = 0; r < x.data.length; r += n) {
    let ms = 0;
    for (let i = 0; i < n; i++) ms += x.data[r + i] ** 2;
    const inv = 1 / Math.sqrt(ms / n + eps);
    for (let i = 0; i < n; i++) out[r + i] = weight.data[i] * x.data[r + i] * inv;
  }
  return tensor(out, x.shape);
}
// </rms_norm>

// -- positions (chapters 8, 16) -------------------------------------------------------
// <sinusoidal_positional_encoding>
// PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(pos / base^(2i/d_model))
// (eq. pe-sin, pe-cos), (T, d_model), computed in float64 as the library does
export function sinusoidal_positional_encoding(T, d_model, base = 10000) {
  const pe = new Float32Array(T * d_model);
  for (let pos = 0; pos < T; pos++) {
    for (let two_i = 0; two_i < d_model; two_i += 2) {
      const angle = pos / base ** (two_i / d_model);
      pe[pos * d_model + two_i] = Math.sin(angle);
      if (two_i + 1 < d_model) pe[pos * d_model + two_i + 1] = Math.cos(angle);
    }
  }
  return tensor(pe, [T, d_model]);
}
// </sinusoidal_positional_encoding>

// <apply_rope>
// theta[pos, i] = pos base^(-2i/d) for i < d/2   (eq. rope-angle), (T, d/2)
export function rope_angles(positions, d, base = 10000) {
  const out = new Float64Array(positions.length * (d / 2));
  positions.forEach((pos, t) => {
    for (let i = 0; i < d / 2; i++) out[t * (d / 2) + i] = pos * base ** (-(2 * i) / d);
  });
  return out;
}

// Rotate each pair of features at position pos by theta   (eq. rope). x (..., T, d);
// layout "interleaved": pair i is (x_2i, x_2i+1); "half": (x_i, x_i+d/2).
export function apply_rope(x, positions, base = 10000, layout = "interleaved") {
  const [T, d] = x.shape.slice(-2);
  if (positions.length !== T) {
    throw new Error(`apply_rope: ${positions.length} positions for T=${T} (x ${x.shape})`);
  }
  const theta = rope_angles(positions, d, base);
  const out = new Float32Array(x.data.length);
  for (let r = 0; r < x.data.length / d; r++) {
    const t = r % T;
    for (let i = 0; i < d / 2; i++) {
      const cos = Math.fround(Math.cos(theta[t * (d / 2) + i]));
      const sin = Math.fround(Math.sin(theta[t * (d / 2) + i]));
      const [a, b] = layout === "half" ? [i, i + d / 2] : [2 * i, 2 * i + 1];
      const x1 = x.data[r * d + a];
      const x2 = x.data[r * d + b];
      out[r * d + a] = x1 * cos - x2 * sin;
      out[r * d + b] = x1 * sin + x2 * cos;
    }
  }
  return tensor(out, x.shape);
}
// </apply_rope>

// -- heads (chapter 5) ----------------------------------------------------------------
// <split_heads>
// (T, h * d_k) -> (h, T, d_k)
export function split_heads(x, n_heads) {
  const [T, D] = x.shape;
  const d_k = D / n_heads;
  const out = new Float32Array(x.data.length);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < n_heads; h++) {
      for (let c = 0; c < d_k; c++) {
        out[(h * T + t) * d_k + c] = x.data[t * D + h * d_k + c];
      }
    }
  }
  return tensor(out, [n_heads, T, d_k]);
}

// (h, T, d_k) -> (T, h * d_k): Concat(head_1, ..., head_h) of eq. multi-head
export function merge_heads(x) {
  const [H, T, d_k] = x.shape;
  const out = new Float32Array(x.data.length);
  for (let h = 0; h < H; h++) {
    for (let t = 0; t < T; t++) {
      for (let c = 0; c < d_k; c++) {
        out[(t * H + h) * d_k + c] = x.data[(h * T + t) * d_k + c];
      }
    }
  }
  return tensor(out, [T, H * d_k]);
}

// (h_kv, T, d) -> (h_kv * n_rep, T, d): K/V head j serves query heads j n_rep ... (eq. gqa)
export function repeat_kv(k, n_rep) {
  if (n_rep === 1) return k;
  const [h_kv, T, d] = k.shape;
  const out = new Float32Array(k.data.length * n_rep);
  for (let j = 0; j < h_kv; j++) {
    const head = k.data.subarray(j * T * d, (j + 1) * T * d);
    for (let r = 0; r < n_rep; r++) out.set(head, (j * n_rep + r) * T * d);
  }
  return tensor(out, [h_kv * n_rep, T, d]);
}
// </split_heads>

// <multi_head_attention>
// MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
// head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)   (eq. multi-head).
// query (T_q, d_model), key = value (T_k, d_model); p = {q_proj, k_proj, v_proj, o_proj},
// each {weight, bias}; cfg = {n_heads, n_kv_heads}. Options: mask (T_q, T_k); rope =
// {positions_q, positions_k, base, layout} rotates q and k (eq. rope); a trace object
// receives q, k, v (h heads; K/V repeated), scores (q . k, unscaled), scale, mask,
// weights and out (per head, before W_O). Returns [out (T_q, d_model), weights
// (h, T_q, T_k)].
export function multi_head_attention(query, key, value, p, cfg, opts = {}) {
  const { mask = null, rope = null, trace = null } = opts;
  const { n_heads, n_kv_heads = n_heads } = cfg;
  let q = linear(query, p.q_proj.weight, p.q_proj.bias); // (T_q, h * d_k)
  let k = linear(key, p.k_proj.weight, p.k_proj.bias); // (T_k, h_kv * d_k)
  let v = linear(value, p.v_proj.weight, p.v_proj.bias);
  q = split_heads(q, n_heads); // (h, T_q, d_k)
  k = split_heads(k, n_kv_heads); // (h_kv, T_k, d_k)
  v = split_heads(v, n_kv_heads);
  if (rope) {
    q = apply_rope(q, rope.positions_q, rope.base, rope.layout);
    k = apply_rope(k, rope.positions_k, rope.base, rope.layout);
  }
  k = repeat_kv(k, n_heads / n_kv_heads); // (h, T_k, d_k)
  v = repeat_kv(v, n_heads / n_kv_heads);
  const [out, weights] = scaled_dot_product_attention(q, k, v, mask); // (h, T_q, d_k)
  if (trace) {
    const [T_q, d_k] = q.shape.slice(1);
    const T_k = k.shape[1];
    Object.assign(trace, {
      q, k, v, weights, out,
      scores: attention_scores(q, k, false),
      scale: 1 / Math.sqrt(d_k),
      mask: mask || { data: new Uint8Array(T_q * T_k).fill(1), shape: [T_q, T_k] },
    });
  }
  // (T_q, h * d_k) @ W_O -> (T_q, d_model)
  return [linear(merge_heads(out), p.o_proj.weight, p.o_proj.bias), weights];
}
// </multi_head_attention>

// -- embeddings -----------------------------------------------------------------------
// <embedding>
// E[ids]: ids (T,) -> (T, d_model), the rows of the table E (V, d_model)
export function embedding(ids, E) {
  const [V, d] = E.shape;
  const out = new Float32Array(ids.length * d);
  ids.forEach((id, t) => {
    if (!Number.isInteger(id) || id < 0 || id >= V) {
      throw inputError(`token id ${id} at position ${t} is not in [0, vocab_size=${V})`);
    }
    out.set(E.data.subarray(id * d, (id + 1) * d), t * d);
  });
  return tensor(out, [ids.length, d]);
}
// </embedding>

function add(a, b) {
  const out = new Float32Array(a.data.length);
  for (let i = 0; i < out.length; i++) out[i] = a.data[i] + b.data[i % b.data.length];
  return tensor(out, a.shape);
}

function inputError(detail) {
  const e = new Error(detail);
  e.code = "bad-input";
  e.detail = detail;
  return e;
}

// -- the layers (chapters 9, 10, 14) --------------------------------------------------
// <residual>
// Post-LN: LN(x + Sublayer(x)); Pre-LN: x + Sublayer(LN(x))   (eq. add-norm, pre-ln).
// norm: the Residual's norm parameters, applied by normalise (LayerNorm unless given)
export function residual(x, sublayer, norm, norm_first, normalise = null) {
  const N = normalise || ((z, p) => layer_norm(z, p.weight, p.bias));
  if (norm_first) return add(x, sublayer(N(x, norm)));
  return N(add(x, sublayer(x)), norm);
}
// </residual>

// <encoder_layer>
// Z_attn = MultiHead(X_pos); Z_add_norm_1 = LN(X_pos + Z_attn); Z_ffn = FFN(Z_add_norm_1);
// Z_encoder_output = LN(Z_add_norm_1 + Z_ffn)   (eq. enc-attn ... enc-out)
export function encoder_layer(x, p, cfg, trace = null) {
  const self = (z) =>
    multi_head_attention(z, z, z, p.self_attn, cfg, { trace: trace && (trace.self = {}) })[0];
  x = residual(x, self, p.self_attn_block.norm, cfg.norm_first);
  const ffn = (z) => feed_forward(z, p.ffn, cfg.activation);
  return residual(x, ffn, p.ffn_block.norm, cfg.norm_first);
}
// </encoder_layer>

// <decoder_layer>
// masked self-attention, cross-attention over the memory (the encoder output), FFN, each
// in its residual   (eq. dec-masked-attn ... dec-out)
export function decoder_layer(y, memory, p, cfg, trace = null) {
  const T = y.shape[0];
  const mask = causal_mask(T);
  const self = (z) =>
    multi_head_attention(z, z, z, p.self_attn, cfg, { mask, trace: trace && (trace.self = {}) })[0];
  y = residual(y, self, p.self_attn_block.norm, cfg.norm_first);
  const cross = (z) =>
    multi_head_attention(z, memory, memory, p.cross_attn, cfg, { trace: trace && (trace.cross = {}) })[0];
  y = residual(y, cross, p.cross_attn_block.norm, cfg.norm_first);
  const ffn = (z) => feed_forward(z, p.ffn, cfg.activation);
  return residual(y, ffn, p.ffn_block.norm, cfg.norm_first);
}
// </decoder_layer>

// <gpt_block>
// x = x + Attn(Norm_1(x)), x = x + FFN(Norm_2(x))   (eq. pre-ln), causal self-attention
export function gpt_block(x, p, cfg, trace = null) {
  const T = x.shape[0];
  const positions = Array.from({ length: T }, (_, t) => t);
  const rope = cfg.positions !== "rope" ? null : {
    positions_q: positions, positions_k: positions, base: cfg.rope_base, layout: cfg.rope_layout,
  };
  const opts = { mask: causal_mask(T), rope, trace: trace && (trace.self = {}) };
  const self = (z) => multi_head_attention(z, z, z, p.self_attn, cfg, opts)[0];
  const ffn = (z) => feed_forward(z, p.ffn, cfg.activation, cfg.gated);
  const n = (z, q) => norm(z, q, cfg); // LayerNorm or RMSNorm, by the config
  x = residual(x, self, p.self_attn_block.norm, true, n);
  return residual(x, ffn, p.ffn_block.norm, true, n);
}

function norm(x, p, cfg) {
  if (cfg.norm === "rmsnorm") return rms_norm(x, p.weight, cfg.norm_eps);
  return layer_norm(x, p.weight, p.bias, cfg.norm_eps);
}
// </gpt_block>

// -- the models (chapters 11, 14) -----------------------------------------------------
// <transformer_forward>
// X_0 = sqrt(d_model) E[src] + PE (eq. embedding-scale), the encoder's N layers, the
// decoder's N layers over tgt (BOS first), logits = Z W_out + b_out   (eq. toy-logits).
// src (T_src,), tgt (T_tgt,) ids -> logits (T_tgt, V)
export function transformer_forward(p, cfg, src, tgt, trace = null) {
  if (trace) Object.assign(trace, { encoder: [], decoder: [] });
  for (const [name, ids] of [["src", src], ["tgt", tgt]]) {
    if (ids.length < 1 || ids.length > cfg.max_len) {
      throw inputError(`${name} has ${ids.length} tokens, not 1 to max_len=${cfg.max_len}`);
    }
  }
  const pe = sinusoidal_positional_encoding(Math.max(src.length, tgt.length), cfg.d_model);
  const embed = (ids) => {
    const x = embedding(ids, p.embed.weight); // (T, d_model)
    const scale = Math.fround(Math.sqrt(cfg.d_model));
    for (let i = 0; i < x.data.length; i++) {
      x.data[i] = Math.fround(x.data[i] * scale) + pe.data[i];
    }
    return x;
  };
  let x = embed(src);
  p.encoder_layers.forEach((layer) => {
    const lt = trace && {};
    x = encoder_layer(x, layer, cfg, lt);
    if (trace) trace.encoder.push(lt);
  });
  if (cfg.norm_first) x = layer_norm(x, p.encoder_norm.weight, p.encoder_norm.bias);
  let y = embed(tgt);
  p.decoder_layers.forEach((layer) => {
    const lt = trace && {};
    y = decoder_layer(y, x, layer, cfg, lt);
    if (trace) trace.decoder.push(lt);
  });
  if (cfg.norm_first) y = layer_norm(y, p.decoder_norm.weight, p.decoder_norm.bias);
  return linear(y, p.out_proj.weight, p.out_proj.bias); // (T_tgt, V)
}
// </transformer_forward>

// <gpt_forward>
// x_0 = E[idx] (+ P[positions])   (eq. gpt-embed), N blocks, logits = Norm_f(x_N) W_out
// (eq. lm-logits), W_out = E^T when tied. tokens (T,) ids -> logits (T, V)
export function gpt_forward(p, cfg, tokens, trace = null) {
  if (trace) trace.layers = [];
  if (tokens.length < 1 || tokens.length > cfg.max_len) {
    throw inputError(`${tokens.length} tokens, not 1 to max_len=${cfg.max_len}`);
  }
  let x = embedding(tokens, p.tok_emb.weight); // (T, d_model)
  if (cfg.positions === "learned") {
    x = add(x, embedding(tokens.map((_, i) => i), p.pos_emb.weight));
  } else if (cfg.positions === "sinusoidal") {
    x = add(x, sinusoidal_positional_encoding(tokens.length, cfg.d_model));
  }
  p.blocks.forEach((block) => {
    const lt = trace && {};
    x = gpt_block(x, block, cfg, lt);
    if (trace) trace.layers.push(lt);
  });
  return linear(norm(x, p.norm_f, cfg), p.lm_head.weight); // (T, V)
}
// </gpt_forward>

// -- safetensors ----------------------------------------------------------------------
// <safetensors>
// The file: 8 bytes, the header's length N as a little-endian u64; N bytes of JSON, {name:
// {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {key: string}}; then the
// raw little-endian data, offsets counted from the end of the header.
export function parseSafetensors(buffer) {
  const bytes = ArrayBuffer.isView(buffer)
    ? buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength)
    : buffer;
  const view = new DataView(bytes);
  if (bytes.byteLength < 8) throw loadError("not-safetensors", `${bytes.byteLength} bytes`);
  const n = Number(view.getBigUint64(0, true));
  if (n < 2 || 8 + n > bytes.byteLength) {
    throw loadError("not-safetensors", `header of ${n} bytes in ${bytes.byteLength}`);
  }
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes, 8, n)));
  } catch (e) {
    throw loadError("not-safetensors", `the header is not JSON (${e.message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) {
    throw loadError("not-safetensors", "the header is not a JSON object");
  }
  const metadata = header.__metadata__ || {};
  const tensors = {};
  const start = 8 + n;
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const { dtype, shape, data_offsets: off } = info || {};
    const size = Array.isArray(shape) ? shape.reduce((a, b) => a * b, 1) : NaN;
    const width = { F32: 4, F16: 2, BF16: 2, F64: 8 }[dtype];
    if (!width) throw loadError("bad-shape", `${name}: dtype ${dtype}, not F32/F16/BF16/F64`);
    const fits = Array.isArray(off) && off[1] - off[0] === size * width;
    if (!fits || start + off[1] > bytes.byteLength) {
      const where = JSON.stringify(off);
      throw loadError("not-safetensors", `${name}: data_offsets ${where} for ${dtype} (${shape})`);
    }
    const data = new Float32Array(size);
    const at = start + off[0];
    for (let i = 0; i < size; i++) {
      if (dtype === "F32") data[i] = view.getFloat32(at + 4 * i, true);
      else if (dtype === "F64") data[i] = view.getFloat64(at + 8 * i, true);
      else if (dtype === "F16") data[i] = float16(view.getUint16(at + 2 * i, true));
      else data[i] = bfloat16(view.getUint16(at + 2 * i, true));
    }
    tensors[name] = { data, shape: shape.slice(), dtype };
  }
  return { tensors, metadata };
}

// IEEE half precision: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits
function float16(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24; // subnormal
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

// bfloat16: the upper 16 bits of a float32
const _bf = new DataView(new ArrayBuffer(4));
function bfloat16(h) {
  _bf.setUint32(0, h << 16);
  return _bf.getFloat32(0);
}

function loadError(code, detail) {
  const e = new Error(`${code}: ${detail}`);
  e.code = code;
  e.detail = detail;
  return e;
}
// </safetensors>

// -- the file against its own metadata ----------------------------------------------
// <configs>
// tl.export_model writes the config's fields (all of them, defaults included) and every
// state_dict name with its shape into the metadata; the page checks the file against
// those, and the config only for what this engine's forward pass needs of it.
export function checkConfig(kind, cfg) {
  if (kind !== "gpt" && kind !== "transformer") throw loadError("bad-config", `kind ${JSON.stringify(kind)}: "gpt" or "transformer" expected`);
  if (typeof cfg !== "object" || cfg === null) throw loadError("bad-config", "the config is not a JSON object");
  for (const key of ["vocab_size", "d_model", "n_heads", "n_layers", "max_len"]) {
    if (!Number.isInteger(cfg[key]) || cfg[key] < 1) throw loadError("bad-config", `${key}=${cfg[key]}: a positive integer expected`);
  }
  const h_kv = cfg.n_kv_heads ?? cfg.n_heads;
  if (!Number.isInteger(h_kv) || cfg.d_model % cfg.n_heads || cfg.n_heads % h_kv) {
    throw loadError("bad-config", `d_model=${cfg.d_model} must split into n_heads=${cfg.n_heads} heads, n_heads into n_kv_heads=${h_kv} groups`);
  }
  return { ...cfg, n_kv_heads: h_kv };
}
// </configs>

// The model's parameters as nested objects (p.blocks[0].self_attn.q_proj.weight, ...)
// from the file's tensors, checked against the metadata's "tensors" (name -> shape): a
// name the file lacks ("missing-tensor"; a tied matrix stored once is found through the
// metadata, as save_model writes it), one it has too many ("unexpected-tensor"), a shape
// that differs ("bad-shape").
export function buildParams(file) {
  const { tensors, metadata } = file;
  let expected;
  try {
    expected = JSON.parse(metadata.tensors);
  } catch (e) {
    throw loadError("no-config", "the metadata names no tensors: export the model again with tl.export_model");
  }
  const found = {};
  for (const [name, shape] of Object.entries(expected)) {
    let t = tensors[name];
    if (!t && typeof metadata[name] === "string" && tensors[metadata[name]]) t = tensors[metadata[name]];
    if (!t) throw loadError("missing-tensor", name);
    if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i])) {
      throw loadError("bad-shape", `${name}: (${t.shape}) in the file, (${shape}) in its metadata`);
    }
    found[name] = t;
  }
  for (const name of Object.keys(tensors)) {
    if (!(name in expected)) throw loadError("unexpected-tensor", name);
  }
  return nestParams(found);
}

// {"blocks.0.self_attn.q_proj.weight": t, ...} -> {blocks: [{self_attn: {q_proj: {weight: t}}}]}
export function nestParams(named) {
  const p = {};
  for (const [name, t] of Object.entries(named)) {
    const parts = name.split(".");
    let node = p;
    parts.slice(0, -1).forEach((part, i) => {
      const next = /^\d+$/.test(parts[i + 1]) ? [] : {};
      node[part] = node[part] || next;
      node = node[part];
    });
    node[parts[parts.length - 1]] = t;
  }
  return p;
}

// -- the page contract: window.tlLive -------------------------------------------------
// <contract>
const attnToNested = (a) => ({
  q: toNested(a.q), k: toNested(a.k), v: toNested(a.v),
  scores: toNested(a.scores), scale: a.scale,
  mask: toNested({ data: Array.from(a.mask.data, Boolean), shape: a.mask.shape }),
  weights: toNested(a.weights), out: toNested(a.out),
});

export function makeModel(file, expectKind = null, weightsUrl = null) {
  const m = file.metadata;
  if (typeof m.config !== "string") throw loadError("no-config", "the file's metadata has no config");
  let given;
  try {
    given = JSON.parse(m.config);
  } catch (e) {
    throw loadError("bad-config", `the config is not JSON (${e.message})`);
  }
  let kind = m.kind || (given && "positions" in given ? "gpt" : "transformer");
  if (expectKind && kind !== expectKind) throw loadError("bad-config", `a ${kind} model, where a ${expectKind} is expected`);
  const config = checkConfig(kind, given);
  const params = buildParams(file);
  let vocab = null;
  if (typeof m.vocab === "string") {
    try {
      vocab = JSON.parse(m.vocab);
    } catch (e) {
      throw loadError("bad-config", `the vocab is not JSON (${e.message})`);
    }
    if (!Array.isArray(vocab) || vocab.length !== config.vocab_size) {
      throw loadError("bad-config", `the vocab has ${vocab && vocab.length} tokens, vocab_size is ${config.vocab_size}`);
    }
  }
  const run = (args, trace) => {
    const ids = args.map((a) => Array.from(a, Number));
    if (kind === "gpt") {
      if (ids.length !== 1) throw inputError("a gpt takes logits(tokens)");
      return gpt_forward(params, config, ids[0], trace);
    }
    if (ids.length !== 2) throw inputError("a transformer takes logits(src, tgt)");
    return transformer_forward(params, config, ids[0], ids[1], trace);
  };
  const model = {
    kind, config, vocab, weightsUrl, params,
    forward: (...args) => run(args, null), // synchronous, a tensor (T, V)
    logits: (...args) => new Promise((resolve) => resolve(toNested(run(args, null)))),
    trace: (...args) => new Promise((resolve) => {
      const t = {};
      const out = { logits: toNested(run(args, t)) };
      if (kind === "gpt") out.layers = t.layers.map((l) => ({ self: attnToNested(l.self) }));
      else {
        out.encoder = t.encoder.map((l) => ({ self: attnToNested(l.self) }));
        out.decoder = t.decoder.map((l) => ({ self: attnToNested(l.self), cross: attnToNested(l.cross) }));
      }
      resolve(out);
    }),
  };
  try {
    // one token through the forward pass: names this engine reads that the file lacks
    run(kind === "gpt" ? [[0]] : [[0], [0]], null);
  } catch (e) {
    throw loadError("bad-config", `this page's engine cannot run the file's tensors (${e.message})`);
  }
  return model;
}

// the book's own models: name -> [file in _static, kind]
const BUILTIN = {
  reversal: ["live/reversal.safetensors", "transformer"],
  addition: ["live/addition.safetensors", "gpt"],
};

function relativeToPage(url) {
  const page = new URL(document.baseURI);
  if (page.origin !== url.origin) return url.href;
  const from = page.pathname.split("/").slice(0, -1);
  const to = url.pathname.split("/");
  let i = 0;
  while (i < from.length && i < to.length - 1 && from[i] === to[i]) i++;
  return "../".repeat(from.length - i) + to.slice(i).join("/");
}

const models = {};
const pending = {};

// one of the book's models, fetched once from this site (next to this file)
function open(name) {
  if (!(name in BUILTIN)) return Promise.reject(loadError("bad-config", `no built-in model ${name}`));
  if (!pending[name]) {
    const url = new URL(BUILTIN[name][0], import.meta.url);
    pending[name] = fetch(url)
      .then((r) => {
        if (!r.ok) throw new Error(`${url.pathname}: HTTP ${r.status}`);
        return r.arrayBuffer();
      })
      .then((buffer) => (models[name] = makeModel(parseSafetensors(buffer), BUILTIN[name][1], relativeToPage(url))));
  }
  return pending[name];
}

// a dropped file: parsed, checked against the kind models[name] has (when it exists),
// registered as models[name]
function load(name, buffer) {
  return new Promise((resolve) => {
    const expect = models[name] ? models[name].kind : BUILTIN[name] ? BUILTIN[name][1] : null;
    resolve((models[name] = makeModel(parseSafetensors(buffer), expect, null)));
  });
}

// the models a page asks for: <div data-tl-live-models="reversal addition">, or a live
// panel's <div class="tl-live-panel" data-model="reversal">
const wanted = new Set();
if (typeof document !== "undefined") {
  document.querySelectorAll("[data-tl-live-models], .tl-live-panel[data-model]").forEach((el) => {
    const names = el.dataset.tlLiveModels || el.dataset.model;
    names.split(/\s+/).filter(Boolean).forEach((n) => wanted.add(n));
  });
}

export const formulas = {
  tensor, zeros, fromNested, toNested, softmax, attention_scores, scaled_dot_product_attention,
  matmul, causal_mask, linear, relu, gelu, gelu_tanh, silu, feed_forward, layer_norm, rms_norm,
  sinusoidal_positional_encoding, rope_angles, apply_rope, split_heads, merge_heads, repeat_kv,
  multi_head_attention, embedding, residual, encoder_layer, decoder_layer, gpt_block,
  transformer_forward, gpt_forward, parseSafetensors, checkConfig, buildParams,
  nestParams, makeModel,
};

// a model that cannot be loaded stays absent from models; its Error is in errors[name]
const errors = {};
export const tlLive = {
  models,
  errors,
  ready: Promise.allSettled(
    [...wanted].map((name) => open(name).catch((e) => Promise.reject((errors[name] = e)))),
  ).then(() => models),
  load,
  open,
  formulas,
};
// once per page, even if this file is reached by two URLs
if (typeof window !== "undefined" && !window.tlLive) window.tlLive = tlLive;
// </contract>
