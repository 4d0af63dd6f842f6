//! RFC 3339 timestamps without a date-time dependency.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_rfc3339() -> String {
    format_unix_millis(now_unix_millis())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Formats milliseconds since the Unix epoch as an RFC 3339 UTC timestamp.
///
/// Digits are written by hand: every task and status carries a timestamp, and `format!`'s
/// machinery was a measurable share of answering a message.
pub fn format_unix_millis(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    let Ok(year @ 0..=9999) = u32::try_from(y) else {
        // Outside four digits: what `format!` writes (a sign, more digits).
        return format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            sod / 3600,
            (sod % 3600) / 60,
            sod % 60
        );
    };
    let mut out = String::with_capacity(24);
    let mut put = |n: u32, width: u32, then: char| {
        for i in (0..width).rev() {
            out.push(char::from(b'0' + (n / 10u32.pow(i) % 10) as u8));
        }
        out.push(then);
    };
    put(year, 4, '-');
    put(m, 2, '-');
    put(d, 2, 'T');
    put(sod / 3600, 2, ':');
    put(sod % 3600 / 60, 2, ':');
    put(sod % 60, 2, '.');
    put(millis, 3, 'Z');
    out
}

/// Formats seconds since the Unix epoch as an HTTP date (RFC 9110 IMF-fixdate), for
/// `Last-Modified`: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn format_http_date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, any fraction) into milliseconds
/// since the Unix epoch.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let frac = &s[start..i];
        if frac.is_empty() {
            return None;
        }
        millis = format!("{frac:0<3}")[..3].parse().ok()?;
    }
    let offset_min = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6
            && (o.starts_with('+') || o.starts_with('-'))
            && o.as_bytes()[3] == b':' =>
        {
            let m = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if o.starts_with('-') { -m } else { m }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// `ts` in this module's format (UTC, milliseconds), so timestamps compare as strings;
/// unparseable input is returned as is.
pub fn normalize(ts: &str) -> String {
    parse_rfc3339(ts).map_or_else(|| ts.to_owned(), format_unix_millis)
}

/// Howard Hinnant's civil-to-days algorithm.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_http_dates() {
        assert_eq!(
            format_http_date(784_111_777),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_unix_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_unix_millis(951_782_400_123),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            format_unix_millis(1_795_307_696_789),
            "2026-11-22T00:34:56.789Z"
        );
    }

    #[test]
    fn formats_as_format_does_in_and_out_of_four_digit_years() {
        let reference = |ms: i64| {
            let secs = ms.div_euclid(1000);
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            let sod = secs.rem_euclid(86_400);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                sod / 3600,
                (sod % 3600) / 60,
                sod % 60,
                ms.rem_euclid(1000)
            )
        };
        let mut ms: i64 = -62_167_219_200_000 - 86_400_000; // the day before 0000-01-01
        while ms < 253_402_300_800_000 + 86_400_000 {
            assert_eq!(format_unix_millis(ms), reference(ms), "{ms}");
            ms += 86_399_999_937; // about a thousand days, every field's digits move
        }
        for ms in [
            -1,
            0,
            999,
            253_402_300_799_999,
            253_402_300_800_000,
            i64::MIN / 2,
        ] {
            assert_eq!(format_unix_millis(ms), reference(ms), "{ms}");
        }
    }

    #[test]
    fn parses_what_it_formats_and_other_offsets() {
        for ms in [0, 951_782_400_123, 1_795_307_696_789, -86_400_001] {
            assert_eq!(parse_rfc3339(&format_unix_millis(ms)), Some(ms));
        }
        assert_eq!(
            parse_rfc3339("2026-11-22T01:34:56.789123+01:00"),
            Some(1_795_307_696_789)
        );
        assert_eq!(
            parse_rfc3339("2026-11-22T00:34:56Z"),
            Some(1_795_307_696_000)
        );
        assert_eq!(
            normalize("2026-11-22T00:34:56.7Z"),
            "2026-11-22T00:34:56.700Z"
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-22T00:34:56",
            "2026-11-22T00:34:56.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
