"""odradek.pipelines."""
