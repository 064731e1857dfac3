//! `wordcount`: how often each word occurs in the text under `input=BUCKET/PREFIX`, written as
//! lines `word<TAB>count` to `part-NNNNN` objects under `output=BUCKET/PREFIX`. Words are what
//! `split_whitespace` splits. Three stages: the load, a scatter that counts each partition's
//! words and sends each word's count to the partition of its hash, and the store.

use mote_sdk::job::Job;

fn driver(job: &mut Job) {
    job.lines("input")
        .flat_map(|line| line.words())
        .map(|word| (word, 1u64))
        .reduce_by_key(|a, b| a + b)
        .save_lines("output", |(word, count)| format!("{word}\t{count}"));
}

mote_sdk::job!(driver);

#[cfg(test)]
mod tests {
    use mote_sdk::job::local::LocalJob;

    #[test]
    fn counts_words() {
        let out = LocalJob::new(super::driver)
            .partitions(3)
            .arg("input", "data/text")
            .arg("output", "results/words")
            .object("data/text/a.txt", "to be or\nnot to be\n")
            .run()
            .unwrap();
        let mut lines = out.lines("results/words");
        lines.sort();
        assert_eq!(lines, ["be\t2", "not\t1", "or\t1", "to\t2"]);
    }
}
