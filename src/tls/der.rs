//! Just enough DER to walk a certificate to fixed fields (RFC 5280 §4.1):
//!
//! ```text
//! Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
//! tbsCertificate ::= SEQUENCE {
//!     [0] version OPTIONAL, serialNumber INTEGER, signature SEQUENCE, issuer SEQUENCE,
//!     validity SEQUENCE { notBefore Time, notAfter Time }, subject SEQUENCE,
//!     subjectPublicKeyInfo SEQUENCE, [1] [2] unique ids OPTIONAL, [3] extensions OPTIONAL }
//! ```

use std::net::IpAddr;

use chrono::{DateTime, NaiveDate, Utc};

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const INTEGER: u8 = 0x02;
const BOOLEAN: u8 = 0x01;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0c;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const VERSION: u8 = 0xa0;
const EXTENSIONS: u8 = 0xa3;
const GENERAL_NAME_DNS: u8 = 0x82;
const GENERAL_NAME_IP: u8 = 0x87;
/// 2.5.29.17, subjectAltName.
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
/// 2.5.4.3, commonName.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed(pub &'static str);

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn peek_tag(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next element's tag and contents.
    fn next(&mut self) -> Result<(u8, &'a [u8]), Malformed> {
        const TRUNCATED: Malformed = Malformed("truncated DER");
        let (&tag, rest) = self.0.split_first().ok_or(TRUNCATED)?;
        if tag & 0x1f == 0x1f {
            return Err(Malformed("unexpected multi-byte DER tag"));
        }
        let (&first, rest) = rest.split_first().ok_or(TRUNCATED)?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 {
                return Err(Malformed("unsupported DER length"));
            }
            let (bytes, rest) = rest.split_at_checked(count).ok_or(TRUNCATED)?;
            let len = bytes
                .iter()
                .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
            (len, rest)
        };
        let (contents, rest) = rest.split_at_checked(len).ok_or(TRUNCATED)?;
        self.0 = rest;
        Ok((tag, contents))
    }

    fn expect(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
        match self.next()? {
            (found, contents) if found == tag => Ok(contents),
            _ => Err(Malformed("unexpected DER element")),
        }
    }

    /// The next element whole (tag and length included).
    fn expect_whole(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
        let before = self.0;
        self.expect(tag)?;
        Ok(&before[..before.len() - self.0.len()])
    }
}

pub(super) struct Fields<'a> {
    /// notBefore and notAfter, each with its tag.
    validity: [(u8, &'a [u8]); 2],
    /// The subject Name's contents (its RDNs).
    pub subject: &'a [u8],
    /// The SubjectPublicKeyInfo, whole.
    pub spki: &'a [u8],
    /// The contents of the extensions SEQUENCE (empty without extensions).
    pub extensions: &'a [u8],
}

impl Fields<'_> {
    pub fn not_before(&self) -> Result<DateTime<Utc>, Malformed> {
        time(self.validity[0].0, self.validity[0].1)
    }

    pub fn not_after(&self) -> Result<DateTime<Utc>, Malformed> {
        time(self.validity[1].0, self.validity[1].1)
    }
}

pub(super) fn certificate(der: &[u8]) -> Result<Fields<'_>, Malformed> {
    let mut outer = Reader(der);
    let mut certificate = Reader(outer.expect(SEQUENCE)?);
    if !outer.is_empty() {
        return Err(Malformed("data after the certificate"));
    }
    let mut tbs = Reader(certificate.expect(SEQUENCE)?);
    if tbs.peek_tag() == Some(VERSION) {
        tbs.next()?;
    }
    tbs.expect(INTEGER)?; // serialNumber
    tbs.expect(SEQUENCE)?; // signature
    tbs.expect(SEQUENCE)?; // issuer
    let mut validity = Reader(tbs.expect(SEQUENCE)?);
    let validity = [validity.next()?, validity.next()?];
    let subject = tbs.expect(SEQUENCE)?;
    let spki = tbs.expect_whole(SEQUENCE)?;
    let mut extensions: &[u8] = &[];
    while !tbs.is_empty() {
        let (tag, contents) = tbs.next()?;
        if tag == EXTENSIONS {
            extensions = Reader(contents).expect(SEQUENCE)?;
        }
    }
    Ok(Fields {
        validity,
        subject,
        spki,
        extensions,
    })
}

/// UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ`, the two forms
/// RFC 5280 allows.
pub(super) fn time(tag: u8, text: &[u8]) -> Result<DateTime<Utc>, Malformed> {
    const BAD: Malformed = Malformed("bad certificate time");
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 13) => {
            let yy = digits(&text[..2]).ok_or(BAD)?;
            let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
            (year, &text[2..])
        }
        (GENERALIZED_TIME, 15) => (digits(&text[..4]).ok_or(BAD)?, &text[4..]),
        _ => return Err(BAD),
    };
    if rest.last() != Some(&b'Z') {
        return Err(BAD);
    }
    let field = |i: usize| digits(&rest[i..i + 2]).ok_or(BAD);
    let date = NaiveDate::from_ymd_opt(i32::try_from(year).map_err(|_| BAD)?, field(0)?, field(2)?)
        .ok_or(BAD)?;
    let at = date
        .and_hms_opt(field(4)?, field(6)?, field(8)?)
        .ok_or(BAD)?;
    Ok(at.and_utc())
}

fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0u32, |n, c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

/// The DNS names and IP addresses of the subjectAltName extension, in order.
pub(super) fn subject_alt_names(extensions: &[u8]) -> Result<Vec<String>, Malformed> {
    let mut list = Reader(extensions);
    while !list.is_empty() {
        let mut extension = Reader(list.expect(SEQUENCE)?);
        let oid = extension.expect(OID)?;
        if extension.peek_tag() == Some(BOOLEAN) {
            extension.next()?;
        }
        let value = extension.expect(OCTET_STRING)?;
        if oid != OID_SUBJECT_ALT_NAME {
            continue;
        }
        let mut general_names = Reader(Reader(value).expect(SEQUENCE)?);
        let mut names = Vec::new();
        while !general_names.is_empty() {
            match general_names.next()? {
                (GENERAL_NAME_DNS, name) => {
                    names.push(String::from_utf8_lossy(name).into_owned());
                }
                (GENERAL_NAME_IP, octets) => {
                    let ip = if let Ok(v4) = <[u8; 4]>::try_from(octets) {
                        IpAddr::from(v4)
                    } else if let Ok(v6) = <[u8; 16]>::try_from(octets) {
                        IpAddr::from(v6)
                    } else {
                        return Err(Malformed("bad IP address in subjectAltName"));
                    };
                    names.push(ip.to_string());
                }
                _ => {}
            }
        }
        return Ok(names);
    }
    Ok(Vec::new())
}

/// The common name of a subject that is exactly one UTF-8 commonName, the way
/// berthd writes its CA's subject.
pub(super) fn single_common_name(subject: &[u8]) -> Option<String> {
    let mut rdns = Reader(subject);
    let mut rdn = Reader(rdns.expect(SET).ok()?);
    let mut attribute = Reader(rdn.expect(SEQUENCE).ok()?);
    let oid = attribute.expect(OID).ok()?;
    let value = attribute.expect(UTF8_STRING).ok()?;
    let single = rdns.is_empty() && rdn.is_empty() && attribute.is_empty();
    (single && oid == OID_COMMON_NAME)
        .then(|| String::from_utf8(value.to_vec()).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_both_forms() {
        let utc = time(UTC_TIME, b"491231235959Z").expect("utc");
        assert_eq!(utc.to_rfc3339(), "2049-12-31T23:59:59+00:00");
        let utc = time(UTC_TIME, b"500101000000Z").expect("utc");
        assert_eq!(utc.to_rfc3339(), "1950-01-01T00:00:00+00:00");
        let generalized = time(GENERALIZED_TIME, b"20500101120000Z").expect("generalized");
        assert_eq!(generalized.to_rfc3339(), "2050-01-01T12:00:00+00:00");
        let bad_times: [&[u8]; 4] = [
            b"4912312359Z",
            b"491231235959+",
            b"4913312359590",
            b"49\xc3\xa9231235959",
        ];
        for bad in bad_times {
            assert!(time(UTC_TIME, bad).is_err(), "{bad:?}");
        }
        assert!(time(SEQUENCE, b"491231235959Z").is_err());
    }

    #[test]
    fn lengths_short_long_and_truncated() {
        let mut long = vec![SEQUENCE, 0x81, 200];
        long.extend([7u8; 200]);
        let mut reader = Reader(&long);
        assert_eq!(reader.expect(SEQUENCE).expect("long form").len(), 200);
        assert!(reader.is_empty());
        let bad_elements: [&[u8]; 5] = [
            &[SEQUENCE],
            &[SEQUENCE, 3, 1],
            &[SEQUENCE, 0x80],
            &[SEQUENCE, 0x85, 0, 0, 0, 0, 1],
            &[0x1f, 0],
        ];
        for bad in bad_elements {
            assert!(Reader(bad).next().is_err(), "{bad:?}");
        }
        assert!(certificate(&[SEQUENCE, 0, 0]).is_err(), "trailing data");
    }
}
