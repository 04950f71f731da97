//! Unit tests of `record.rs`.

use super::*;

#[test]
fn records_round_trip_and_unknown_versions_are_refused() {
    let op = OpRecord {
        version: HISTORY_VERSION,
        time_ms: 5,
        op: Op::Undo {
            turn: 3,
            to: Some(2),
            mode: Mode::Files,
            snapshot: Some(ObjectId([7; 32])),
        },
    };
    let bytes = encode(&op).unwrap();
    assert_eq!(decode::<OpRecord>(&bytes).unwrap(), op);
    let mut future = bytes.clone();
    future[0] = 2;
    assert!(
        decode::<OpRecord>(&future)
            .unwrap_err()
            .contains("version 2")
    );
    assert!(decode::<OpRecord>(&[]).is_err());
    assert!(decode::<OpRecord>(&bytes[..bytes.len() - 1]).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(
        decode::<OpRecord>(&longer)
            .unwrap_err()
            .contains("trailing")
    );
}

#[test]
fn truncate_keeps_char_boundaries() {
    assert_eq!(truncate("héllo".into(), 2), "h");
    assert_eq!(truncate("abc".into(), 10), "abc");
}
