"""ckpt command line: parses, calls, prints."""
import click


@click.group()
def main() -> None:
    """Solve and replay gradient-checkpointing schedules for Deeploy training graphs."""
