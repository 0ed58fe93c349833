"""The crash loop (kill -9 under load, then check every acknowledged message), its sender
processes, and the long soak (`just soak`)."""
