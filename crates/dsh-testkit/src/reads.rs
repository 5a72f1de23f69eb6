//! Network reads for property tests: a stream cut anywhere, as a socket may deliver it.

/// `bytes` as consecutive reads cut at `cuts`: positions taken modulo `bytes.len() + 1`, in any
/// order, repeats allowed (they give empty reads, which parsers must take too). Joined, the
/// reads are `bytes`. Property tests feed them to a parser to show the split changes nothing.
pub fn split_reads<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut reads = Vec::with_capacity(points.len() + 1);
    let mut from = 0;
    for to in points.into_iter().chain([bytes.len()]) {
        reads.push(&bytes[from..to]);
        from = to;
    }
    reads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reads_join_to_the_whole_stream_whatever_the_cuts() {
        let bytes = b"data: hello\n\n";
        let reads = split_reads(bytes, &[100, 3, 3, 0]);
        assert_eq!(reads.concat(), bytes);
        assert_eq!(reads.len(), 5);
        assert_eq!(split_reads(b"", &[7]), [b"", b""]);
    }
}
