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
    let e = decode::<OpRecord>(&future).unwrap_err();
    assert_eq!(
        e,
        DecodeError::Version {
            what: "history record",
            found: 2,
            expected: HISTORY_VERSION
        }
    );
    assert!(e.to_string().contains("version 2"), "{e}");
    assert_eq!(
        decode::<OpRecord>(&[]),
        Err(DecodeError::Empty {
            what: "history record"
        })
    );
    assert!(matches!(
        decode::<OpRecord>(&bytes[..bytes.len() - 1]),
        Err(DecodeError::Fields { .. })
    ));
    let mut longer = bytes.clone();
    longer.push(0);
    let e = decode::<OpRecord>(&longer).unwrap_err();
    assert!(matches!(e, DecodeError::Trailing { trailing: 1, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "history record: 1 trailing bytes after its fields"
    );
}

#[test]
fn truncate_keeps_char_boundaries() {
    assert_eq!(truncate("héllo".into(), 2), "h");
    assert_eq!(truncate("abc".into(), 10), "abc");
}
