use candle_core::quantized::gguf_file;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let mut f = std::fs::File::open(&p).unwrap();
    let ct = gguf_file::Content::read(&mut f).unwrap();
    let mut types = std::collections::BTreeMap::new();
    for (n, t) in &ct.tensor_infos {
        *types.entry(format!("{:?}", t.ggml_dtype)).or_insert(0) += 1;
        if n.contains("blk.0.") || !n.contains("blk") {
            println!("{n} {:?} {:?}", t.ggml_dtype, t.shape);
        }
    }
    println!("{types:?}");
    for (k, v) in &ct.metadata {
        if !k.starts_with("tokenizer.ggml.t") && !k.starts_with("tokenizer.ggml.merges") {
            println!("{k} = {:?}", v);
        }
    }
}
