//! `sarvcrawl aws ...`: create a deployment's resources and its API keys.

use clap::{Args, Subcommand};
use sarvcrawl_aws::bootstrap::{bootstrap, Template};
use sarvcrawl_aws::keys::generate_key;
use sarvcrawl_aws::{Aws, Clients, Names};
use sarvcrawl_core::domain::UserId;
use sarvcrawl_core::ports::SystemClock;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Subcommand)]
pub enum AwsCommand {
    /// Create the table, queues and bucket that template.yaml declares, named after a prefix,
    /// on the account or emulator the AWS environment points at (AWS_ENDPOINT_URL honoured),
    /// and print `export SARVCRAWL_...=...` lines for them.
    Bootstrap(BootstrapArgs),
    /// Create an API key for a user: its hash is stored in the table, the key printed once.
    AddKey(AddKeyArgs),
}

#[derive(Args)]
pub struct BootstrapArgs {
    /// Prefix of the resource names (`<prefix>-jobs`, `<prefix>-work`, ...).
    #[arg(long)]
    prefix: String,
    /// The SAM template to read the resource definitions from.
    #[arg(long, default_value = "template.yaml")]
    template: PathBuf,
}

#[derive(Args)]
pub struct AddKeyArgs {
    /// The user the key belongs to.
    user: String,
}

pub async fn run(cmd: AwsCommand) -> Result<(), String> {
    let clients = Clients::from_env().await;
    match cmd {
        AwsCommand::Bootstrap(a) => {
            let valid = !a.prefix.is_empty()
                && a.prefix.len() <= 40
                && a.prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !valid {
                return Err("--prefix takes 1 to 40 letters, digits or dashes".into());
            }
            let text = std::fs::read_to_string(&a.template)
                .map_err(|e| format!("cannot read {}: {e}", a.template.display()))?;
            let template = Template::parse(&text).map_err(|e| e.to_string())?;
            let names = bootstrap(&clients, &template, &a.prefix)
                .await
                .map_err(|e| e.to_string())?;
            print!("{}", names.exports());
            Ok(())
        }
        AwsCommand::AddKey(a) => {
            let names = Names::from_env()?;
            let aws = Aws::new(&clients, &names, Arc::new(SystemClock));
            let key = generate_key().map_err(|e| format!("no randomness: {e}"))?;
            aws.keys
                .add(&UserId(a.user.clone()), &key)
                .await
                .map_err(|e| e.to_string())?;
            println!("{key}");
            eprintln!(
                "API key for user {} created; it is shown only this once",
                a.user
            );
            Ok(())
        }
    }
}
