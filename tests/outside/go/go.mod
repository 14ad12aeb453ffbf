module myapp

go 1.19

require kvcache v0.0.0

replace kvcache => /path/to/kvcache/bindings/go
