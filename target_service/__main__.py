from target_service.server import cli

cli(prog_name="python -m target_service")
