//! `redlatch completions SHELL` and `redlatch man`: clap's own generators, so the
//! completions and the manual page always match the flags.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory};

use crate::exit::{self, Failure};

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completion script for `shell` (e.g. `redlatch completions bash >
/// /etc/bash_completion.d/redlatch`).
pub fn completions<C: CommandFactory>(args: &CompletionsArgs) -> ExitCode {
    let mut cmd = C::command();
    clap_complete::generate(args.shell, &mut cmd, "redlatch", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Prints the roff manual page (e.g. `redlatch man > /usr/local/share/man/man1/redlatch.1`).
pub fn man<C: CommandFactory>() -> ExitCode {
    let mut page = Vec::new();
    let rendered = clap_mangen::Man::new(C::command()).render(&mut page);
    let written = rendered.and_then(|()| std::io::stdout().write_all(&page));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            Failure::new(exit::INTERNAL, format!("cannot write the manual page: {e}")).report()
        }
    }
}
