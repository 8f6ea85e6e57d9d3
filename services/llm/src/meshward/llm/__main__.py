from meshward.bus import run_service

from .handlers import create_service

if __name__ == "__main__":
    run_service(create_service())
