module kvcache

go 1.19
