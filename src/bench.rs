#[derive(clap::Args)]
pub struct BenchArgs {}
pub async fn run(_a: BenchArgs) -> anyhow::Result<()> {
    Ok(())
}
