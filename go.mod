module github.com/spliced-proxy/spliced

go 1.26.0
