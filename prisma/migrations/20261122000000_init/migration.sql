-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "Execution" (
    "id" UUID NOT NULL,
    "kickoffId" TEXT,
    "crewName" TEXT NOT NULL,
    "teamId" TEXT NOT NULL,
    "channelId" TEXT NOT NULL,
    "threadTs" TEXT,
    "userId" TEXT NOT NULL,
    "inputs" JSONB NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'starting',
    "requestId" TEXT NOT NULL,
    "webhookSecret" TEXT NOT NULL,
    "webhooks" BOOLEAN NOT NULL DEFAULT false,
    "progressTs" TEXT,
    "output" TEXT,
    "error" TEXT,
    "completionTs" TEXT,
    "noticeClaimedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "startedAt" TIMESTAMP(3),
    "finishedAt" TIMESTAMP(3),
    "nextPollAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "pollBackoffMs" INTEGER NOT NULL DEFAULT 2000,
    "leaseOwner" TEXT,
    "leaseExpiresAt" TIMESTAMP(3),
    "notFoundSince" TIMESTAMP(3),

    CONSTRAINT "Execution_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Review" (
    "id" UUID NOT NULL,
    "executionId" UUID NOT NULL,
    "taskKey" TEXT NOT NULL,
    "taskName" TEXT NOT NULL,
    "agent" TEXT,
    "round" INTEGER NOT NULL,
    "output" TEXT NOT NULL,
    "outputHash" TEXT NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "messageTs" TEXT,
    "postClaimedAt" TIMESTAMP(3),
    "fileAttached" BOOLEAN NOT NULL DEFAULT false,
    "decidedBy" TEXT,
    "decision" TEXT,
    "feedback" TEXT,
    "decidedAt" TIMESTAMP(3),
    "resumeStatus" TEXT,
    "resumeMessage" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Review_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "WebhookEvent" (
    "id" UUID NOT NULL,
    "executionId" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "dedupeKey" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "receivedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "processedAt" TIMESTAMP(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "lastError" TEXT,

    CONSTRAINT "WebhookEvent_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "Execution_kickoffId_key" ON "Execution"("kickoffId");

-- CreateIndex
CREATE UNIQUE INDEX "Execution_requestId_key" ON "Execution"("requestId");

-- CreateIndex
CREATE INDEX "Execution_channelId_createdAt_idx" ON "Execution"("channelId", "createdAt");

-- CreateIndex
CREATE INDEX "Execution_state_nextPollAt_idx" ON "Execution"("state", "nextPollAt");

-- CreateIndex
CREATE INDEX "Review_state_idx" ON "Review"("state");

-- CreateIndex
CREATE UNIQUE INDEX "Review_executionId_taskKey_round_key" ON "Review"("executionId", "taskKey", "round");

-- CreateIndex
CREATE INDEX "WebhookEvent_processedAt_idx" ON "WebhookEvent"("processedAt");

-- CreateIndex
CREATE UNIQUE INDEX "WebhookEvent_executionId_dedupeKey_key" ON "WebhookEvent"("executionId", "dedupeKey");

-- AddForeignKey
ALTER TABLE "Review" ADD CONSTRAINT "Review_executionId_fkey" FOREIGN KEY ("executionId") REFERENCES "Execution"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "WebhookEvent" ADD CONSTRAINT "WebhookEvent_executionId_fkey" FOREIGN KEY ("executionId") REFERENCES "Execution"("id") ON DELETE CASCADE ON UPDATE CASCADE;

