//! `berthd secret show | refresh [--secret <64 hex>]`: the API's bearer token, barkd's
//! command.

use crate::cli::SecretCommand;
use crate::datadir::Layout;

pub fn run(layout: &Layout, action: &SecretCommand) -> anyhow::Result<()> {
    layout.ensure()?;
    let token = match action {
        SecretCommand::Show => layout.load_or_create_token()?,
        SecretCommand::Refresh { secret } => layout.refresh_token(*secret)?,
    };
    println!("{}", token.expose());
    Ok(())
}
