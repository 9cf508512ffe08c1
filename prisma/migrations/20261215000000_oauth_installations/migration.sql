-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "enterpriseId" TEXT;

-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "teamId" TEXT;

-- CreateTable
CREATE TABLE "SlackInstallation" (
    "id" UUID NOT NULL,
    "installKey" TEXT NOT NULL,
    "teamId" TEXT,
    "enterpriseId" TEXT,
    "isEnterpriseInstall" BOOLEAN NOT NULL DEFAULT false,
    "appId" TEXT,
    "botId" TEXT,
    "botUserId" TEXT,
    "botToken" TEXT,
    "botRefreshToken" TEXT,
    "userId" TEXT,
    "userToken" TEXT,
    "userRefreshToken" TEXT,
    "data" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "SlackInstallation_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "SlackInstallation_installKey_key" ON "SlackInstallation"("installKey");

-- CreateIndex
CREATE INDEX "SlackInstallation_teamId_idx" ON "SlackInstallation"("teamId");

-- CreateIndex
CREATE INDEX "SlackInstallation_enterpriseId_idx" ON "SlackInstallation"("enterpriseId");

-- CreateIndex
CREATE INDEX "Execution_teamId_state_idx" ON "Execution"("teamId", "state");

