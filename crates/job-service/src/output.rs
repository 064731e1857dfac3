//! A job's output, committed or not at all (Hadoop's output committer, which users of Spark
//! and Hadoop know). A store stage's partition `k` is written under the output directory's
//! `_temporary/JOB/part-NNNNN`; when the job succeeds its controller moves every part into
//! place as `PREFIX/part-NNNNN` and then writes `PREFIX/_SUCCESS`, so a reader that sees the
//! marker sees the whole result. A job that fails or is cancelled leaves nothing: its staged
//! parts are deleted. A directory holding committed output is not written again.

use crate::input::{directory, list_all};
use bytes::Bytes;
use mote_objects::{ObjectError, Objects};

/// Where a staged part lives, below the output directory.
const STAGING: &str = "_temporary/";

/// The marker a committed output carries.
const SUCCESS: &str = "_SUCCESS";

/// One store stage's output: the argument that names it and where it is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// The job argument.
    pub arg: String,
    /// Its bucket.
    pub bucket: String,
    /// Its prefix, a directory.
    pub prefix: String,
}

/// The key output partition `index` of job `job` is written to until the job commits.
pub fn staged_key(prefix: &str, job: &str, index: u32) -> String {
    format!("{}{}", staging(prefix, job), part(index))
}

/// Job `job`'s staging directory under `prefix`.
fn staging(prefix: &str, job: &str) -> String {
    format!("{}{STAGING}{job}/", directory(prefix))
}

fn part(index: u32) -> String {
    format!("part-{index:05}")
}

/// The committed objects under the output directory `prefix`, in key order: every object but
/// what running (or crashed) jobs staged there.
pub async fn committed(
    objects: &Objects,
    bucket: &str,
    prefix: &str,
) -> Result<Vec<(String, u64)>, ObjectError> {
    let dir = directory(prefix);
    let listed = list_all(objects, bucket, &dir).await?;
    Ok(listed
        .into_iter()
        .filter(|(key, _)| !key[dir.len()..].starts_with(STAGING))
        .collect())
}

impl Output {
    /// Moves job `job`'s staged parts into place, then marks the output `_SUCCESS`; answers how
    /// many parts there were.
    pub async fn commit(&self, objects: &Objects, job: &str) -> Result<usize, ObjectError> {
        let (dir, staging) = (directory(&self.prefix), staging(&self.prefix, job));
        let staged = list_all(objects, &self.bucket, &staging).await?;
        for (key, _) in &staged {
            let target = format!("{dir}{}", &key[staging.len()..]);
            objects.rename(&self.bucket, key, &target).await?;
        }
        objects
            .put(&self.bucket, &format!("{dir}{SUCCESS}"), Bytes::new())
            .await?;
        objects.delete_prefix(&self.bucket, &staging).await?;
        Ok(staged.len())
    }

    /// Deletes job `job`'s staged parts: it ended without a result.
    pub async fn abort(&self, objects: &Objects, job: &str) -> Result<usize, ObjectError> {
        objects
            .delete_prefix(&self.bucket, &staging(&self.prefix, job))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_objects::ObjectsConfig;

    fn objects() -> (tempfile::TempDir, Objects) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        let objects = Objects::new(ObjectsConfig::Directory(dir.path().into())).unwrap();
        (dir, objects)
    }

    async fn keys(objects: &Objects) -> Vec<String> {
        list_all(objects, "out", "")
            .await
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    fn output(prefix: &str) -> Output {
        Output {
            arg: "output".into(),
            bucket: "out".into(),
            prefix: prefix.into(),
        }
    }

    #[test]
    fn staged_parts_are_below_the_directory() {
        assert_eq!(
            staged_key("counts", "9-1", 3),
            "counts/_temporary/9-1/part-00003"
        );
        assert_eq!(staged_key("", "9-1", 0), "_temporary/9-1/part-00000");
    }

    #[tokio::test]
    async fn a_commit_moves_every_part_into_place_then_marks_success() {
        let (dir, objects) = objects();
        for index in [1, 0] {
            let key = staged_key("counts", "7", index);
            objects.put("out", &key, Bytes::from("x\n")).await.unwrap();
        }
        // Another job's staging, and a sibling directory, are not this job's.
        let other = staged_key("counts", "8", 0);
        objects
            .put("out", &other, Bytes::from("y\n"))
            .await
            .unwrap();
        objects
            .put("out", "counts-old/part-00000", Bytes::from("z\n"))
            .await
            .unwrap();
        assert_eq!(committed(&objects, "out", "counts").await.unwrap(), []);

        assert_eq!(output("counts").commit(&objects, "7").await.unwrap(), 2);
        assert_eq!(
            keys(&objects).await,
            [
                "counts-old/part-00000",
                "counts/_SUCCESS",
                "counts/_temporary/8/part-00000",
                "counts/part-00000",
                "counts/part-00001",
            ]
        );
        assert!(!dir.path().join("out/counts/_temporary/7").exists());
        let found = committed(&objects, "out", "counts/").await.unwrap();
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[tokio::test]
    async fn an_abort_leaves_nothing_not_even_a_directory() {
        let (dir, objects) = objects();
        let key = staged_key("runs/a", "7", 0);
        objects.put("out", &key, Bytes::from("x\n")).await.unwrap();
        assert_eq!(output("runs/a").abort(&objects, "7").await.unwrap(), 1);
        assert_eq!(keys(&objects).await, Vec::<String>::new());
        assert!(!dir.path().join("out/runs").exists());
    }
}
