use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

type Samples = (Vec<(GpuRef, u32, u32)>, Vec<(JobId, u64)>);

/// Samples compared bit for bit (a NaN utilization must come back as the same NaN).
fn bits(t: &Telemetry) -> Samples {
    (t.0.iter().map(|s| (s.0, s.1.to_bits(), s.2.0)).collect(), t.1.clone())
}

/// Encodes the sequence as a writer would (a delta from each frame before,
/// a key frame every `KEY_EVERY`), then decodes it frame by frame.
fn round_trip(ticks: &[Telemetry]) -> usize {
    let mut written: Option<Basis> = None;
    let mut read: Option<Basis> = None;
    let mut bytes = 0;
    for (i, t) in ticks.iter().enumerate() {
        let seq = (i as i64) * 3 + 5;
        let base = written.as_ref().filter(|b| b.since_key + 1 < KEY_EVERY);
        let frame = encode(base, seq, &t.0, &t.1);
        bytes += frame.len();
        let key = base.is_none();
        written = Some(Basis::after(base, seq, key, &t.0, &t.1));
        let base = match base_of(&frame, seq).unwrap() {
            None => None,
            Some(b) => {
                assert_eq!(Some(b), read.as_ref().map(|r| r.seq));
                read.as_ref()
            }
        };
        let back = decode(base, seq, &frame).unwrap();
        assert_eq!(bits(&back), bits(t), "frame {i}");
        read = Some(Basis::after(base, seq, key, &back.0, &back.1));
    }
    bytes
}

/// A cluster's telemetry as the simulator makes it: jobs on whole nodes
/// report one value per job with noise, some GPUs sit idle, progress moves
/// at a rate with rounding jitter, jobs come and go, nodes join and leave.
fn cluster(ticks: usize, nodes: u32, rng: &mut ChaCha8Rng) -> Vec<Telemetry> {
    let mut up: Vec<u32> = (1..=nodes).collect();
    let mut jobs: Vec<(JobId, u64, u64)> = (0..nodes as u64 * 2).map(|j| (JobId(j * 7 + 1), rng.random_range(0..50_000), rng.random_range(1..40))).collect();
    let mut next_job = 10_000;
    let mut out = Vec::new();
    for tick in 0..ticks {
        if tick % 17 == 3 {
            up.retain(|n| n % 11 != (tick as u32 % 11));
            up.push(nodes + tick as u32);
        }
        if tick % 5 == 0 {
            jobs.remove(rng.random_range(0..jobs.len()));
            let at = rng.random_range(0..jobs.len());
            jobs.insert(at, (JobId(next_job), 0, rng.random_range(1..40)));
            next_job += 1;
        }
        let mut gpus = Vec::new();
        for &node in &up {
            let busy = node % 3 != 0 || tick % 7 < 3;
            let util = (rng.random_range(60.0..100.0f64) * 10.0).round() as f32 / 10.0;
            let mem = Mib(rng.random_range(3_000..15_000));
            for index in 0..8u8 {
                let gpu = GpuRef { node: NodeId(node), index };
                gpus.push(if busy { GpuSample(gpu, util, mem) } else { GpuSample(gpu, 0.0, Mib(0)) });
            }
        }
        for job in &mut jobs {
            job.1 += job.2 + rng.random_range(0..2);
        }
        out.push((gpus, jobs.iter().map(|j| (j.0, j.1)).collect()));
    }
    out
}

#[test]
fn a_cluster_day_round_trips_exactly_in_a_small_fraction_of_its_json() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ticks = cluster(300, 40, &mut rng);
    let bytes = round_trip(&ticks);
    let json: usize = ticks.iter().map(|t| serde_json::to_string(t).unwrap().len()).sum();
    assert!(bytes * 8 < json, "{bytes} bytes of frames for {json} of JSON");
}

#[test]
fn odd_values_round_trip_bit_for_bit() {
    let gpu = |node, index| GpuRef { node: NodeId(node), index };
    let odd = [f32::NAN, -0.0, 0.0, 33.333, 1e9, -5.5, f32::INFINITY, 100.0, 0.1, f32::MIN_POSITIVE];
    let first: Telemetry = (
        odd.iter().enumerate().map(|(i, u)| GpuSample(gpu(u32::MAX - i as u32, 255), *u, Mib(u32::MAX - i as u32))).collect(),
        vec![(JobId(u64::MAX), u64::MAX), (JobId(0), 0), (JobId(3), 7)],
    );
    // Then: reversed lists (every job moved), a duplicated GPU and job, steps going back and wrapping.
    let mut second = first.clone();
    second.0.reverse();
    second.0.push(second.0[0].clone());
    second.1 = vec![(JobId(3), 2), (JobId(0), u64::MAX), (JobId(u64::MAX), 0), (JobId(3), 9)];
    let third: Telemetry = (Vec::new(), Vec::new());
    let fourth = second.clone();
    round_trip(&[first, second, third, fourth]);
}

#[test]
fn a_frame_decoded_against_another_base_is_refused() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let ticks = cluster(3, 4, &mut rng);
    let b1 = Basis::after(None, 10, true, &ticks[0].0, &ticks[0].1);
    let frame = encode(Some(&b1), 12, &ticks[1].0, &ticks[1].1);
    assert_eq!(decode(None, 12, &frame), Err(FrameError::WrongBase { wanted: 10, had: None }));
    let other = Basis::after(None, 11, true, &ticks[0].0, &ticks[0].1);
    assert_eq!(decode(Some(&other), 12, &frame), Err(FrameError::WrongBase { wanted: 10, had: Some(11) }));
    assert!(decode(Some(&b1), 12, &frame).is_ok());
    assert!(matches!(base_of(&[9], 12), Err(FrameError::Malformed(_))));
    assert!(matches!(base_of(&[2, 12], 12), Err(FrameError::Malformed(_))), "a base at or before 0");
}

#[test]
fn damaged_frames_are_errors_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let ticks = cluster(2, 6, &mut rng);
    let b1 = Basis::after(None, 1, true, &ticks[0].0, &ticks[0].1);
    for (base, frame) in [(None, encode(None, 1, &ticks[0].0, &ticks[0].1)), (Some(&b1), encode(Some(&b1), 2, &ticks[1].0, &ticks[1].1))] {
        let seq = if base.is_some() { 2 } else { 1 };
        for cut in 0..frame.len() {
            assert!(decode(base, seq, &frame[..cut]).is_err(), "cut at {cut} of {}", frame.len());
        }
        let mut longer = frame.clone();
        longer.push(0);
        assert!(decode(base, seq, &longer).is_err(), "a byte too many");
        for _ in 0..2_000 {
            let mut bad = frame.clone();
            let at = rng.random_range(0..bad.len());
            bad[at] = rng.random();
            let _ = decode(base, seq, &bad);
        }
        // Counts far beyond the frame allocate nothing and fail.
        let mut huge = vec![frame[0]];
        if base.is_some() {
            huge.push(1);
        }
        huge.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(decode(base, seq, &huge).is_err());
    }
}
