//! Unit tests of `record.rs`.

use super::*;

#[test]
fn compression_round_trips_and_skips_incompressible() {
    let text = b"fn main() { println!(\"hello\"); }\n".repeat(100);
    let (c, z) = compress(&text);
    assert_eq!(c, Codec::Zstd);
    assert_eq!(
        decompress(c, &z, u32::try_from(text.len()).unwrap()).unwrap(),
        text
    );
    let mut noise = vec![0u8; 4096];
    blake3::Hasher::new()
        .update(b"seed")
        .finalize_xof()
        .fill(&mut noise);
    let (c, _) = compress(&noise);
    assert_eq!(c, Codec::Raw);
}

#[test]
fn frames_place_members_end_to_end() {
    let a = PendingObject::whole(
        ObjectId::of_blob(b"aaa"),
        ObjectKind::Blob,
        3,
        b"aaa".into(),
    );
    let b = PendingObject::whole(ObjectId::of_blob(b"bb"), ObjectKind::Blob, 2, b"bb".into());
    let f = NewFrame::pack(&[a, b]);
    assert_eq!(f.raw_len, 5);
    assert_eq!((f.members[1].within, f.members[1].len), (3, 2));
    let raw = decompress(f.codec, &f.stored, f.raw_len).unwrap();
    assert_eq!(&raw[3..5], b"bb");
}

/// A prefix of a frame is the frame's first bytes, at least as many as asked for; asked for
/// the whole frame (or past it) it is the whole frame, length checked; a damaged frame or
/// one shorter than the prefix asked for is an error, never a short or wrong prefix
/// passed off as the frame's start.
#[test]
fn prefixes_of_a_frame_are_its_first_bytes() {
    // 1 MiB of text that varies (so it spans several zstd blocks), as a cold capture packs.
    let mut raw = Vec::new();
    let mut n = 0u64;
    while raw.len() < 1024 * 1024 {
        raw.extend_from_slice(format!("let value_{n} = {};\n", n * 7919 % 1000).as_bytes());
        n += 1;
    }
    raw.truncate(1024 * 1024);
    let len = u32::try_from(raw.len()).unwrap();
    let (c, z) = compress(&raw);
    assert_eq!(c, Codec::Zstd);
    for upto in [1, 4096, 128 * 1024, 300_000, 700_001] {
        let p = decompress_prefix(c, &z, len, upto).unwrap();
        assert!(
            p.len() >= upto && p.len() < raw.len(),
            "{upto}: {}",
            p.len()
        );
        assert_eq!(p[..], raw[..p.len()], "{upto}");
    }
    assert_eq!(decompress_prefix(c, &z, len, raw.len()).unwrap(), raw);
    assert_eq!(decompress_prefix(c, &z, len, raw.len() + 5).unwrap(), raw);
    // A parity frame's prefixes likewise, a flipped byte rebuilt first.
    let mut protected = compress_protected(&raw, DENSE_LEVEL).unwrap();
    protected[100] ^= 0x41;
    for upto in [1, 300_000] {
        let p = decompress_prefix(Codec::ZstdParity, &protected, len, upto).unwrap();
        assert!(p.len() >= upto && p.len() < raw.len(), "{upto}: {}", p.len());
        assert_eq!(p[..], raw[..p.len()], "{upto}");
    }
    // A frame cut short: the prefix past its end is refused.
    let cut = &z[..z.len() / 2];
    assert!(decompress_prefix(c, cut, len, 900_000).is_err());
    // Garbage is not zstd.
    assert!(decompress_prefix(c, &[7u8; 64], len, 1000).is_err());
    // A raw frame's prefix is the frame.
    assert_eq!(
        decompress_prefix(Codec::Raw, b"abcdef", 6, 2).unwrap(),
        b"abcdef"
    );
}

/// A frame of empty files alone is a byte long: an empty one would sit at the offset of
/// the frame after it, and frames are known by their offset (a tree read the empty frame).
#[test]
fn a_frame_of_empty_objects_takes_a_byte() {
    let empty = PendingObject::whole(ObjectId::of_blob(b""), ObjectKind::Blob, 0, Vec::new());
    let f = NewFrame::pack(&[empty]);
    assert_eq!(f.raw_len, 1);
    assert_eq!(f.stored.len(), 1);
    assert_eq!((f.members[0].within, f.members[0].len), (0, 0));
    assert_eq!(decompress(f.codec, &f.stored, f.raw_len).unwrap().len(), 1);
    assert!(NewFrame::pack_trees(&[]).is_empty());
}

/// Trees are cut into frames of about [`TREE_FRAME_RAW_BYTES`], none of them empty.
#[test]
fn trees_are_packed_in_small_frames() {
    let trees: Vec<PendingObject> = (0..100u32)
        .map(|i| {
            let bytes = vec![u8::try_from(i % 251).unwrap(); 2000];
            PendingObject::whole(ObjectId::of_tree(&bytes), ObjectKind::Tree, 2000, bytes)
        })
        .collect();
    let frames = NewFrame::pack_trees(&trees);
    assert_eq!(frames.iter().map(|f| f.members.len()).sum::<usize>(), 100);
    assert!(frames.len() >= 3, "{} frames", frames.len());
    assert!(
        frames
            .iter()
            .all(|f| (f.raw_len as usize) < TREE_FRAME_RAW_BYTES + 2000)
    );
}

#[test]
fn records_refuse_future_versions_and_out_of_frame_payloads() {
    let mut r = ObjectRecord {
        kind: ObjectKind::Blob,
        size: 1,
        offset: 2,
        stored_len: 3,
        codec: Codec::Raw,
        frame_len: 10,
        within: 4,
        len: 6,
        written: 4,
        delta: None,
    };
    assert_eq!(ObjectRecord::decode(&r.encode().unwrap()).unwrap(), r);
    r.len = 7;
    assert_eq!(
        ObjectRecord::decode(&r.encode().unwrap()),
        Err(RecordError::OutOfFrame)
    );
    r.len = 6;
    r.frame_len = MAX_FRAME_BYTES + 1;
    assert_eq!(
        ObjectRecord::decode(&r.encode().unwrap()),
        Err(RecordError::OutOfFrame)
    );
    r.frame_len = 10;
    let mut future = r.encode().unwrap();
    future[0] = 9;
    assert_eq!(
        ObjectRecord::decode(&future),
        Err(RecordError::UnknownVersion(9))
    );
}

fn sample() -> ObjectRecord {
    ObjectRecord {
        kind: ObjectKind::Blob,
        size: 1000,
        offset: 70_000,
        stored_len: 120,
        codec: Codec::Raw,
        frame_len: 120,
        within: 0,
        len: 120,
        written: 1_700_000_000,
        delta: None,
    }
}

#[test]
fn whole_records_keep_version_1_bytes_and_deltas_append_base_and_depth() {
    let whole = sample();
    let v1 = whole.encode().unwrap();
    // Format 1's bytes: version, kind, varints, codec, varints (docs/format.md).
    assert_eq!(
        v1,
        [
            1, 0, 0xE8, 0x07, 0xF0, 0xA2, 0x04, 120, 0, 120, 0, 120, 0x80, 0xE2, 0xCF, 0xAA, 0x06
        ]
    );
    let mut delta = sample();
    delta.delta = Some(DeltaBase {
        base: ObjectId([7; 32]),
        depth: 3,
    });
    let v2 = delta.encode().unwrap();
    assert_eq!(v2[0], DELTA_RECORD_VERSION);
    assert_eq!(&v2[1..v1.len()], &v1[1..]);
    assert_eq!(&v2[v1.len()..v1.len() + 32], &[7; 32]);
    assert_eq!(v2[v1.len() + 32..], [3]);
    assert_eq!(ObjectRecord::decode(&v2).unwrap(), delta);
    assert_eq!(ObjectRecord::decode(&v1).unwrap(), whole);
    // A version-1 record with a base's bytes after it, or a version-2 one without: refused.
    let mut long = v2.clone();
    long[0] = RECORD_VERSION;
    assert!(matches!(
        ObjectRecord::decode(&long),
        Err(RecordError::Decode(_))
    ));
    let mut short = v1.clone();
    short[0] = DELTA_RECORD_VERSION;
    assert!(matches!(
        ObjectRecord::decode(&short),
        Err(RecordError::Decode(_))
    ));
}

#[test]
fn impossible_deltas_are_refused() {
    for (depth, kind, size, base) in [
        (0, ObjectKind::Blob, 10, ObjectId([1; 32])),
        (
            crate::object::delta::MAX_DEPTH + 1,
            ObjectKind::Blob,
            10,
            ObjectId([1; 32]),
        ),
        (1, ObjectKind::ChunkedBlob, 10, ObjectId([1; 32])),
        (
            1,
            ObjectKind::Blob,
            u64::from(MAX_FRAME_BYTES) + 1,
            ObjectId([1; 32]),
        ),
        (1, ObjectKind::Tree, 10, ObjectId::ZERO),
    ] {
        let mut r = sample();
        r.kind = kind;
        r.size = size;
        r.delta = Some(DeltaBase { base, depth });
        assert!(
            matches!(
                ObjectRecord::decode(&r.encode().unwrap()),
                Err(RecordError::BadDelta(_))
            ),
            "{depth} {kind:?} {size}"
        );
    }
    let mut r = sample();
    r.delta = Some(DeltaBase {
        base: ObjectId([1; 32]),
        depth: crate::object::delta::MAX_DEPTH,
    });
    assert!(ObjectRecord::decode(&r.encode().unwrap()).is_ok());
}
