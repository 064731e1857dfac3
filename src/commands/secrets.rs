//! Secrets the commands are given (a token, an S3 secret key): never on the command line, where
//! every user of the machine reads them (`ps`, `/proc/PID/cmdline`), but in a file a flag names
//! or in an environment variable (`/proc/PID/environ` is its owner's alone). The flags that once
//! took a secret's value are kept, hidden, only to say so.

use anyhow::{Context, bail, ensure};
use std::path::Path;

/// Where one secret may come from, as the messages about it name them.
pub struct SecretSource {
    /// The flag that names a file holding the secret, such as `--s3-secret-key-file`.
    pub file_flag: &'static str,
    /// The environment variable that may hold it, such as `MOTE_S3_SECRET_KEY`.
    pub env: &'static str,
    /// The hidden flag that once took the secret itself, such as `--s3-secret-key`.
    pub argv_flag: &'static str,
}

/// The S3 secret access key of `mote up` and `mote bench sort`.
pub const S3_SECRET_KEY: SecretSource = SecretSource {
    file_flag: "--s3-secret-key-file",
    env: "MOTE_S3_SECRET_KEY",
    argv_flag: "--s3-secret-key",
};

/// The token the client commands send.
pub const TOKEN: SecretSource = SecretSource {
    file_flag: "--token-file",
    env: "MOTE_TOKEN",
    argv_flag: "--token",
};

impl SecretSource {
    /// The secret, without surrounding whitespace (a file's last newline): from `file` if the
    /// flag named one (the more specific choice, made for this command), else from the
    /// environment variable; `None` if neither holds one. `in_argv`, the hidden flag's value,
    /// is refused with what to use instead.
    pub fn read(
        &self,
        file: Option<&Path>,
        in_argv: Option<&str>,
    ) -> anyhow::Result<Option<String>> {
        if in_argv.is_some() {
            bail!(
                "{} is not taken: a secret on the command line is readable by every user of this \
                 machine (ps, /proc/PID/cmdline); put it in the environment variable {} or in a \
                 file given with {} FILE",
                self.argv_flag,
                self.env,
                self.file_flag
            );
        }
        if let Some(file) = file {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {} ({})", file.display(), self.file_flag))?;
            let secret = text.trim();
            ensure!(
                !secret.is_empty(),
                "{} ({}) is empty",
                file.display(),
                self.file_flag
            );
            return Ok(Some(secret.to_owned()));
        }
        Ok(std::env::var(self.env)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source whose variable no other test (nor the environment) sets.
    const UNSET: SecretSource = SecretSource {
        file_flag: "--x-file",
        env: "MOTE_TEST_SECRET_NOBODY_SETS",
        argv_flag: "--x",
    };

    #[test]
    fn a_secret_on_the_command_line_is_refused_with_the_ways_that_remain() {
        let e = S3_SECRET_KEY.read(None, Some("hunter2")).unwrap_err();
        let message = e.to_string();
        for named in [
            "--s3-secret-key ",
            "MOTE_S3_SECRET_KEY",
            "--s3-secret-key-file FILE",
        ] {
            assert!(message.contains(named), "{message}");
        }
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn a_file_gives_its_trimmed_contents_and_an_empty_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "s3cret\n").unwrap();
        assert_eq!(
            UNSET.read(Some(&file), None).unwrap().as_deref(),
            Some("s3cret")
        );
        std::fs::write(&file, "\n").unwrap();
        let e = UNSET.read(Some(&file), None).unwrap_err().to_string();
        assert!(e.contains("is empty") && e.contains("--x-file"), "{e}");
        let missing = dir.path().join("missing");
        let e = UNSET.read(Some(&missing), None).unwrap_err().to_string();
        assert!(e.contains("cannot read") && e.contains("--x-file"), "{e}");
        assert_eq!(UNSET.read(None, None).unwrap(), None);
    }
}
