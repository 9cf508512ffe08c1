-- CreateTable
CREATE TABLE "ThreadReply" (
    "id" UUID NOT NULL,
    "channelId" TEXT NOT NULL,
    "ts" TEXT NOT NULL,
    "threadTs" TEXT NOT NULL,
    "userId" TEXT NOT NULL,
    "text" TEXT,
    "reviewId" UUID,
    "round" INTEGER,
    "flowRequestId" UUID,
    "answeredAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ThreadReply_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "ThreadReply_createdAt_idx" ON "ThreadReply"("createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "ThreadReply_channelId_ts_key" ON "ThreadReply"("channelId", "ts");

-- CreateIndex
CREATE INDEX "Execution_channelId_threadTs_idx" ON "Execution"("channelId", "threadTs");

-- CreateIndex
CREATE INDEX "Review_channelId_messageTs_idx" ON "Review"("channelId", "messageTs");

