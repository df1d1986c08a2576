//! GRES and TRES strings as Slurm writes them, read for GPUs:
//! `gpu:4`, `gpu:a100:4`, `gpu:a100:2(IDX:0-1)`, `gpu:2(S:0-1)`, several
//! comma-separated (`gpu:2,mps:100`), the per-node ask `gres:gpu:2` or
//! `gres/gpu:2` and the TRES form `cpu=4,gres/gpu=2,gres/gpu:a100=2`; and
//! GPU shards (`gres/shard`: `shard:8`, `shard:l4:2(2/4,0/4)`), how a site
//! lets several jobs share one GPU.

use crate::domain::slurm::expand_indices;

/// GPUs named in one GRES list: how many, of which type, at which indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gpus {
    pub count: u32,
    pub kind: Option<String>,
    pub idx: Vec<u32>,
    /// Shards of GPUs (`gres/shard`): configured, used or asked, and the
    /// GPUs they sit on (a job's `gres_detail`).
    pub shards: u32,
    pub shard_idx: Vec<u32>,
}

/// Splits on commas that are not inside parentheses (`gpu:2(IDX:0,2),mps:1`).
fn items(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// The GPUs in a GRES list (`sinfo`'s Gres / GresUsed, `gres_detail`).
/// Unknown shapes count as no GPUs rather than failing the whole reading.
pub fn parse(text: &str) -> Gpus {
    let mut gpus = Gpus::default();
    for item in items(text) {
        let item = item.strip_prefix("gres:").or_else(|| item.strip_prefix("gres/")).unwrap_or(item);
        let (spec, detail) = match item.split_once('(') {
            Some((s, d)) => (s, Some(d.trim_end_matches(')'))),
            None => (item, None),
        };
        let mut parts = spec.split(':');
        let name = parts.next();
        if !matches!(name, Some("gpu" | "shard")) {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        let (kind, count) = match rest.as_slice() {
            [] => (None, Some(1)),
            [n] => match n.parse::<u32>() {
                Ok(n) => (None, Some(n)),
                Err(_) => (Some(n.to_string()), Some(1)),
            },
            [k, n, ..] => (Some(k.to_string()), n.parse::<u32>().ok()),
        };
        let Some(count) = count else { continue };
        let idx = detail.and_then(|d| d.strip_prefix("IDX:")).and_then(expand_indices);
        if name == Some("shard") {
            gpus.shards = gpus.shards.saturating_add(count);
            gpus.shard_idx.extend(idx.unwrap_or_default());
            continue;
        }
        gpus.count = gpus.count.saturating_add(count);
        if gpus.kind.is_none() {
            gpus.kind = kind.filter(|k| !k.is_empty() && k != "(null)");
        }
        if let Some(idx) = idx {
            gpus.idx.extend(idx);
        }
    }
    gpus
}

/// GPUs in a TRES string (`cpu=4,mem=1M,gres/gpu=2`): the untyped total.
pub fn tres_gpus(text: &str) -> Option<u32> {
    tres(text, "gres/gpu")
}

/// GPU shards in a TRES string (`cpu=1,gres/shard=2`).
pub fn tres_shards(text: &str) -> Option<u32> {
    tres(text, "gres/shard")
}

fn tres(text: &str, key: &str) -> Option<u32> {
    text.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_in_every_shape_slurm_writes() {
        assert_eq!(parse("gpu:fake:4"), Gpus { count: 4, kind: Some("fake".into()), idx: vec![], shards: 0, shard_idx: vec![] });
        assert_eq!(parse("gpu:fake:2(IDX:0-1)"), Gpus { count: 2, kind: Some("fake".into()), idx: vec![0, 1], shards: 0, shard_idx: vec![] });
        assert_eq!(parse("gpu:2(IDX:0,2),mps:100"), Gpus { count: 2, kind: None, idx: vec![0, 2], shards: 0, shard_idx: vec![] });
        assert_eq!(parse("gres:gpu:2").count, 2);
        assert_eq!(parse("gres/gpu:a100:3").count, 3);
        assert_eq!(parse("gpu:a100:4(S:0-1)"), Gpus { count: 4, kind: Some("a100".into()), idx: vec![], shards: 0, shard_idx: vec![] });
        assert_eq!(parse("gpu"), Gpus { count: 1, kind: None, idx: vec![], shards: 0, shard_idx: vec![] });
        assert_eq!(parse("(null)").count, 0);
        assert_eq!(parse("").count, 0);
        assert_eq!(parse("gpu:a100:x").count, 0, "a count that is not a number is no GPUs, not a panic");
        assert_eq!(parse("gpu:fake:0(IDX:N/A)").count, 0);
        let shared = parse("gpu:l4:1(IDX:0),shard:l4:3(0/0,2/4,1/4,0/4)");
        assert_eq!((shared.count, shared.shards, shared.idx.clone()), (1, 3, vec![0]), "shards apart from GPUs");
        assert_eq!(parse("shard:2(IDX:1)").shard_idx, vec![1], "a job's shards, on GPU 1 (22.05's gres_detail)");
        assert_eq!((parse("gres:shard:2").count, parse("gres:shard:2").shards), (0, 2));
        assert_eq!(parse("gpu:l4:4,shard:16").shards, 16);
        assert_eq!(tres_gpus("cpu=4,mem=1M,gres/gpu=2,gres/gpu:a100=2"), Some(2));
        assert_eq!(tres_gpus("cpu=1,node=1"), None);
        assert_eq!((tres_shards("cpu=1,gres/shard=2"), tres_gpus("cpu=1,gres/shard=2")), (Some(2), None));
    }
}
