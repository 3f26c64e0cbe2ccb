module cronprobe

go 1.26.7

require github.com/robfig/cron/v3 v3.0.1
